//! `hearth tier` end to end: simulation output, plans, devices files, bad input.

mod cli_support;
use cli_support::*;

const CHAINS: &[&str] = &["synth:chains", "--requests", "6000", "--os-cache", "1MiB"];

#[test]
fn sim_json_reports_every_scheme_and_partitions_use_the_fast_device() {
    let mut args = vec!["tier", "sim"];
    args.extend(CHAINS);
    args.extend(["--schemes", "slow,borg", "--cdp", "none,slack", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&stdout(&hearth(&args))).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let names: Vec<_> = rows.iter().map(|r| format!("{} {}", r["scheme"], r["prefetch"])).collect();
    assert_eq!(
        names,
        [
            "\"slow-only\" \"none\"",
            "\"slow-only\" \"CDP-slack\"",
            "\"BORG partition\" \"none\"",
            "\"BORG partition\" \"CDP-slack\""
        ]
    );
    for r in rows {
        assert_eq!(r["stats"]["requests"].as_u64(), Some(3000), "the second half is measured");
    }
    assert_eq!(rows[0]["fast_percent"].as_f64(), Some(0.0));
    assert!(rows[2]["fast_percent"].as_f64().unwrap() > 0.0);
    assert!(
        rows[1]["stats"]["prefetches"].as_u64().unwrap() > 0 || rows[3]["stats"]["prefetches"].as_u64().unwrap() > 0
    );
}

#[test]
fn plan_holds_at_most_the_capacity_and_user_devices_load() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let devices = dir.path().join("devices.toml");
    std::fs::write(&devices, "[device.tape]\nlatency_ns = 50000000\nbytes_per_sec = 100000000\n").unwrap();
    let mut args = vec!["tier", "plan"];
    args.extend(CHAINS);
    args.extend(["--fast-size", "400KiB", "--method", "freq", "-o", plan.to_str().unwrap()]);
    assert!(hearth(&args).status.success());
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(json["capacity_blocks"].as_u64(), Some(100));
    let blocks: u64 = json["runs"].as_array().unwrap().iter().map(|r| r[1].as_u64().unwrap()).sum();
    assert_eq!(blocks, 100);
    assert_eq!(json["method"], "freq");
    // Sizes in blocks, as in every command: 100 blocks of 4 KiB is the same plan.
    let mut args = vec!["tier", "plan"];
    args.extend(CHAINS);
    let in_blocks = dir.path().join("blocks.json");
    args.extend(["--fast-size", "100blocks", "--method", "freq", "-o", in_blocks.to_str().unwrap()]);
    stdout(&hearth(&args));
    assert_eq!(std::fs::read(&in_blocks).unwrap(), std::fs::read(&plan).unwrap());

    let mut args = vec!["tier", "sim"];
    args.extend(CHAINS);
    args.extend(["--schemes", "slow", "--slow", "tape", "--devices", devices.to_str().unwrap()]);
    let out = stdout(&hearth(&args));
    // Human units, not 50000000 ns and 100000000 B/s.
    assert!(out.contains("slow device 50 ms, 100 MB/s"), "{out}");
}

#[test]
fn bad_input_is_named() {
    let mut args = vec!["tier", "sim"];
    args.extend(CHAINS);
    args.extend(["--slow", "floppy"]);
    let err = failure(&hearth(&args));
    assert!(err.contains("--slow") && err.contains("floppy") && err.contains("nvme"), "{err}");
    let mut args = vec!["tier", "sim"];
    args.extend(CHAINS);
    args.extend(["--fast-size", "150%"]);
    assert!(failure(&hearth(&args)).contains("--fast-size: \"150%\" must be between 0% and 100%"));
    let mut args = vec!["tier", "sim"];
    args.extend(CHAINS);
    args.extend(["--cdp", "ccdp0"]);
    assert!(failure(&hearth(&args)).contains("ccdp0"));
    let dir = tempfile::tempdir().unwrap();
    let devices = dir.path().join("d.toml");
    std::fs::write(&devices, "[device.x]\nlatency = 3\n").unwrap();
    let mut args = vec!["tier", "sim"];
    args.extend(CHAINS);
    args.extend(["--devices", devices.to_str().unwrap()]);
    let err = failure(&hearth(&args));
    assert!(err.contains("d.toml") && err.contains("latency"), "{err}");
}

/// Every column of `text` starts where its header's does (as `hearth sim`'s table), no markdown.
fn assert_aligned_table(text: &str, header_starts: &str) {
    assert!(!text.contains('|') && !text.contains("###") && !text.contains("---"), "markdown left:\n{text}");
    let lines: Vec<&str> =
        text.lines().skip_while(|l| !l.starts_with(header_starts)).take_while(|l| !l.is_empty()).collect();
    assert!(lines.len() >= 2, "no table under {header_starts:?}:\n{text}");
    // Right-aligned columns: every line ends at the header's width.
    let width = lines[0].chars().count();
    for l in &lines[1..] {
        assert_eq!(l.chars().count(), width, "{l:?} is not aligned with {:?}", lines[0]);
    }
}

#[test]
fn sim_and_sweep_print_aligned_tables_like_sim() {
    let mut args = vec!["tier", "sim"];
    args.extend(CHAINS);
    args.extend(["--schemes", "slow,borg", "--cdp", "none,slack"]);
    let out = stdout(&hearth(&args));
    assert_aligned_table(&out, "scheme ");
    assert!(out.contains("\nBORG partition  CDP-slack "), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("sweep");
    // The sweep runs some 70 simulations: a shorter trace.
    let args = ["tier", "sweep", "synth:chains", "--requests", "2000", "--os-cache", "1MiB", "-o", path(&out_dir)];
    let out = stdout(&hearth(&args));
    assert_aligned_table(&out, "ratio ");
    assert_aligned_table(&out, "prefetching ");
    assert!(out.contains("Mean response time by prefetching variant"), "{out}");
    assert!(out_dir.join("cdp_variants.csv").is_file(), "the CSV stays the machine format");
}

//! `hearth warmup sim` and `hearth analyze --reaccess` end to end on a small
//! hand-made CloudPhysics CSV.

mod cli_support;
use cli_support::*;

use std::fmt::Write as _;

/// Three 60-second "days"; each second reads one of the same 20 blocks
/// (4 KiB = 8 sectors), cycling, so a 20-block cache warmed from the
/// previous day hits from its first request while a cold one misses 20 times.
fn write_trace(dir: &std::path::Path) -> String {
    let mut csv = String::from("version,time,op,size,lbn\n");
    for day in 0..3u64 {
        for s in 0..60u64 {
            let _ = writeln!(csv, "1,{},28,4096,{}", 1000 + day * 60 + s, (s % 20) * 8);
        }
    }
    // Close the last period.
    let _ = writeln!(csv, "1,1180,28,4096,0");
    let path = dir.join("days.csv");
    std::fs::write(&path, csv).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn warmup_sim_json_shows_preloaded_caches_converging_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let out = stdout(&hearth(&[
        "warmup",
        "sim",
        &trace,
        "-q",
        "--json",
        "--period",
        "60s",
        "--interval",
        "5s",
        "--sizes",
        "20blocks",
        "--regions",
        "4KiB",
        "--thn",
        "2",
        "--thv",
        "1%",
        "--threads",
        "1",
    ]));
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    // Two evaluated periods x (cold, last-k, first-k, top-k, always-warm).
    assert_eq!(rows.len(), 10);
    for row in rows {
        let method = row["method"].as_str().unwrap();
        let converged = row["converged"].as_u64();
        match method {
            // 20 cold misses at one request a second: intervals 0..4 (5 s each) are all misses.
            "cold" => assert_eq!(converged, Some(4), "{row}"),
            _ => assert_eq!(converged, Some(0), "{method}"),
        }
        if method != "cold" {
            assert_eq!(row["load_reduction"].as_f64(), Some(1.0), "{method}");
        }
    }
}

#[test]
fn warmup_sim_table_plots_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let plots = dir.path().join("plots");
    let out = stdout(&hearth(&[
        "warmup",
        "sim",
        &trace,
        "-q",
        "--period",
        "60s",
        "--interval",
        "5s",
        "--sizes",
        "20blocks,10blocks",
        "--regions",
        "4KiB",
        "--plots",
        plots.to_str().unwrap(),
    ]));
    assert!(out.contains("first-k") && out.contains("always-warm") && out.contains("80 KiB"), "{out}");
    assert!(plots.join("warmup_80KiB_4KiB.png").exists() && plots.join("warmup_40KiB_4KiB.svg").exists());
    let texts = svg_texts(&plots.join("warmup_40KiB_4KiB.svg"));
    let name = std::path::Path::new(&trace).file_name().unwrap().to_str().unwrap();
    let title = format!("Hit rate after restarts: {name}, 40 KiB cache, 4 KiB regions");
    assert!(texts.contains(&title), "{title} missing: {texts:?}");
    assert!(texts.iter().any(|t| t == "restart"), "restarts are marked in the legend: {texts:?}");
    assert!(float_ticks(&texts).is_empty(), "{texts:?}");
    // One period of history is not enough.
    let o = hearth(&["warmup", "sim", &trace, "-q", "--period", "1d"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("whole period"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = hearth(&["warmup", "sim", &trace, "--period", "3 weeks"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown duration unit"));
}

#[test]
fn analyze_reaccess_reports_hourly_reaccesses() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let out = stdout(&hearth(&["analyze", "--reaccess", &trace]));
    // 181 accesses to 20 blocks: 161 re-accesses, all within the hour.
    assert!(out.contains("re-accesses       161 of 181"), "{out}");
    assert!(out.contains("cannot show daily re-accesses"), "{out}");
}

/// Shares are percentages and durations carry units; the old bare forms
/// still work, read as before, with a note naming the new spelling.
#[test]
fn warmup_sim_old_bare_shares_and_seconds_are_read_as_before_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let run = |period: &str, thv: &str, budget: &str| {
        let args = ["warmup", "sim", &trace, "-q", "--json", "--sizes", "20blocks", "--regions", "4KiB"];
        let more = ["--interval", "5s", "--period", period, "--thv", thv, "--budget", budget];
        hearth(&[&args[..], &more[..]].concat())
    };
    let new = run("60s", "1%", "50%");
    let old = run("60", "0.01", "50");
    assert_eq!(stdout(&new), stdout(&old));
    assert!(!String::from_utf8_lossy(&new.stderr).contains("note:"), "{}", String::from_utf8_lossy(&new.stderr));
    let notes = String::from_utf8_lossy(&old.stderr);
    for note in [
        "note: --period 60 is read as 60s; write durations with a unit (--period 60s)",
        "note: --thv 0.01 is read as 1%; write shares as percentages (--thv 1%)",
        "note: --budget 50 is read as 50%; write shares as percentages (--budget 50%)",
    ] {
        assert!(notes.contains(note), "{notes}");
    }
    // A bare number above 1 cannot be the old fraction: the percentage is suggested.
    let err = failure(&run("60s", "5", "50%"));
    assert!(err.contains("\"5\" is not a share: write 5% for a percentage"), "{err}");
}

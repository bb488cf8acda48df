//! The `hearth` binary end to end on the bundled trace and on broken input.

mod cli_support;
use cli_support::*;

#[test]
fn sim_json_on_bundled_trace_is_consistent() {
    let trace = repo_file("data/cloudPhysicsIO.csv.zst");
    let out = stdout(&hearth(&["sim", &trace, "-q", "-p", "lru,opt", "-s", "1%,10%", "--json"]));
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let get = |i: usize, k: &str| rows[i][k].as_u64().unwrap();
    for i in 0..4 {
        assert!(get(i, "hits") < get(i, "requests"));
        assert_eq!(get(i, "bytes"), get(i, "requests") * 4096, "block mode: every access is one 4 KiB block");
    }
    // Rows come size by size, policies in the order given: OPT never loses to LRU,
    // and a bigger cache never loses to a smaller one.
    assert!(get(1, "hits") >= get(0, "hits") && get(3, "hits") >= get(2, "hits"));
    assert!(get(2, "hits") >= get(0, "hits") && get(2, "cache_bytes") > get(0, "cache_bytes"));
}

#[test]
fn sim_table_and_mrc_plot() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("mrc");
    let trace = repo_file("data/cloudPhysicsIO.csv.zst");
    let out = stdout(&hearth(&["sim", &trace, "-q", "-p", "lru,arc", "-s", "2%,20%", "--mrc", base.to_str().unwrap()]));
    assert!(out.contains("hit ratio") && out.contains("LRU") && out.contains("ARC"), "{out}");
    let svg = std::fs::read_to_string(base.with_extension("svg")).unwrap();
    assert!(svg.contains("LRU") && svg.contains("ARC"));
    assert!(!svg.contains("by policy family"), "two curves share one plot");
    assert!(std::fs::metadata(base.with_extension("png")).unwrap().len() > 1000);
    let texts = svg_texts(&base.with_extension("svg"));
    assert!(
        texts.iter().any(|t| t == "Miss-ratio curve: cloudPhysicsIO.csv.zst"),
        "the title names the trace: {texts:?}"
    );
    assert!(float_ticks(&texts).is_empty(), "{texts:?}");
}

#[test]
fn mrc_of_every_policy_has_a_panel_per_family() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("mrc");
    let args = ["sim", "synth:zipf:2000:0.9", "--requests", "20000", "-q", "-p", "all", "-s", "2%,10%,50%"];
    stdout(&hearth(&[&args[..], &["--mrc", base.to_str().unwrap()]].concat()));
    let svg = std::fs::read_to_string(base.with_extension("svg")).unwrap();
    let titles = ["Recency: LRU and kin", "Frequency", "FIFO-based", "Adaptive", "Offline bounds"];
    for text in titles.iter().chain(&["Miss-ratio curves by policy family", "S3-FIFO", "W-TinyLFU", "BeladySize"]) {
        assert!(svg.contains(text), "{text} is missing");
    }
    assert!(std::fs::metadata(base.with_extension("png")).unwrap().len() > 10_000);
}

#[test]
fn malformed_trace_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "version,time,op,size,lbn\n1,5,28,512,100\n1,6,28,lots,101\n").unwrap();
    let o = hearth(&["sim", bad.to_str().unwrap(), "--format", "cpcsv", "-q"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.csv:3"), "error should name file and line: {err}");
}

#[test]
fn unknown_policy_and_bad_size_are_refused() {
    let trace = repo_file("data/cloudPhysicsIO.csv.zst");
    let o = hearth(&["sim", &trace, "-q", "-p", "lru,belady2"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown policy \"belady2\""));
    let o = hearth(&["sim", &trace, "-q", "-s", "150%"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("150%"));
}

#[test]
fn analyze_reports_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let trace = repo_file("data/cloudPhysicsIO.csv.zst");
    let out = stdout(&hearth(&["analyze", &trace, "--json", "--plots", dir.path().to_str().unwrap()]));
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let n = |k: &str| r[k].as_u64().unwrap();
    assert_eq!(n("requests"), 113_872);
    assert_eq!(n("reads") + n("writes") + n("others"), n("requests"));
    assert_eq!(n("cold_accesses"), n("unique_keys"));
    assert!(n("accesses") >= n("requests"));
    for f in ["reuse_distance.svg", "temporal_distance.png", "frequency.svg", "request_sizes.png"] {
        assert!(dir.path().join(f).exists(), "missing plot {f}");
    }
}

#[test]
fn two_level_run_exports_a_storage_trace_that_replays_identically() {
    let dir = tempfile::tempdir().unwrap();
    let exported = dir.path().join("storage.csv");
    let common = ["-q", "-p", "lru,mq", "-s", "10%", "--placement", "ac,ev", "--json"];
    let mut args = vec!["sim", "synth:oltp", "--requests", "200000", "--client-cache", "5%"];
    args.extend(["--export-storage-trace", exported.to_str().unwrap()]);
    args.extend(common);
    let live: serde_json::Value = serde_json::from_str(&stdout(&hearth(&args))).unwrap();
    // The replay sizes its cache from the storage-level footprint, so give bytes.
    let bytes = live[0]["result"]["cache_bytes"].as_u64().unwrap().to_string();
    let mut args = vec!["sim", exported.to_str().unwrap(), "-q", "-p", "lru,mq", "-s", bytes.as_str()];
    args.extend(["--placement", "ac,ev", "--json"]);
    let replayed: serde_json::Value = serde_json::from_str(&stdout(&hearth(&args))).unwrap();
    let (live, replayed) = (live.as_array().unwrap(), replayed.as_array().unwrap());
    assert_eq!(live.len(), 4);
    for (l, r) in live.iter().zip(replayed) {
        assert_eq!(l["placement"], r["placement"]);
        assert_eq!(l["storage"], r["storage"], "storage-level stats differ");
    }
    // Below a client cache, eviction-based placement beats access-based for LRU.
    let hits = |i: usize| live[i]["storage"]["read_hits"].as_u64().unwrap();
    assert!(hits(1) > hits(0), "EV {} vs AC {}", hits(1), hits(0));
}

#[test]
fn several_traces_with_warmup_and_intervals_are_tagged_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    std::fs::write(&a, "1\n2\n1\n2\n3\n1\n2\n3\n").unwrap();
    std::fs::write(&b, "7\n7\n7\n7\n").unwrap();
    let args = ["sim", a.to_str().unwrap(), b.to_str().unwrap(), "-q", "-p", "lru", "-s", "3", "--json"];
    let out = stdout(&hearth(&[&args[..], &["--warmup", "2", "--window", "4"]].concat()));
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows[0]["trace"].as_str().unwrap().ends_with("a.txt"));
    assert!(rows[1]["trace"].as_str().unwrap().ends_with("b.txt"));
    // a: the first two requests only warm the cache; then 1 2 hit, 3 misses, 1 hits | 2 3 hit.
    assert_eq!((rows[0]["requests"].as_u64(), rows[0]["hits"].as_u64()), (Some(6), Some(5)));
    assert_eq!(rows[0]["interval_miss_ratios"], serde_json::json!([0.25, 0.0]));
    assert_eq!((rows[1]["requests"].as_u64(), rows[1]["hits"].as_u64()), (Some(2), Some(2)));

    let bad = hearth(&[&args[..], &["--warmup", "ten"]].concat());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--warmup"), "{bad:?}");
}

#[test]
fn mrc_exact_equals_full_and_samples_come_close() {
    let trace = repo_file("data/cloudPhysicsIO.csv.zst");
    let args = ["mrc", &trace, "-q", "-m", "exact,shards,mini,full", "--rate", "10%", "-s", "1%,5%,10%,25%"];
    let out = stdout(&hearth(&[&args[..], &["--json"]].concat()));
    let curves: serde_json::Value = serde_json::from_str(&out).unwrap();
    let curve = |method: &str| {
        let c = curves.as_array().unwrap().iter().find(|c| c["method"] == method).expect(method);
        c["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["hits"].as_f64().unwrap(), p["requests"].as_f64().unwrap()))
            .collect::<Vec<_>>()
    };
    let full = curve("full");
    assert_eq!(curve("exact"), full, "the one-pass LRU curve is exact");
    for method in ["shards", "mini"] {
        for (got, want) in curve(method).iter().zip(&full) {
            let (m, f) = (1.0 - got.0 / got.1, 1.0 - want.0 / want.1);
            assert!((m - f).abs() < 0.02, "{method} at 10%: miss ratio {m} vs full {f}");
        }
    }
    let table = stdout(&hearth(&args));
    assert!(table.contains("LRU shards 10%: mean absolute error"), "{table}");
}

/// SHARDS on the bundled oracleGeneral trace (read sampled, before
/// decoding): a 1% sample of its 48,974 objects is too small to trust and
/// says so; a 50% one is not, says nothing, and comes close to full LRU.
#[test]
fn shards_warns_when_its_sample_is_small() {
    let trace = shared("cloudPhysicsIO.oracleGeneral.bin");
    let small = hearth(&["mrc", &trace, "-q", "-m", "shards", "--rate", "1%", "--shards-hot-keys", "0"]);
    let warning = String::from_utf8_lossy(&small.stderr).to_string();
    assert!(small.status.success(), "{small:?}");
    assert!(warning.contains("warning: the SHARDS sample holds 511 distinct keys, fewer than the 8192"), "{warning}");
    assert!(warning.contains("or stratify it (--shards-hot-keys 128)"), "{warning}");
    // Stratified by default; the hot keys are not counted in the sample,
    // and one of the 511 is among them.
    let stratified = hearth(&["mrc", &trace, "-q", "-m", "shards", "--rate", "1%"]);
    let warning = String::from_utf8_lossy(&stratified.stderr).to_string();
    assert!(warning.contains("holds 510 distinct keys") && !warning.contains("stratify it"), "{warning}");
    let args = ["mrc", &trace, "-q", "-m", "shards,full", "--rate", "50%", "-s", "1%,10%,50%", "--json"];
    let large = hearth(&args);
    assert!(large.stderr.is_empty(), "{}", String::from_utf8_lossy(&large.stderr));
    let curves: serde_json::Value = serde_json::from_str(&stdout(&large)).unwrap();
    let miss_ratios = |i: usize| -> Vec<f64> {
        let points = curves[i]["points"].as_array().unwrap();
        points.iter().map(|p| 1.0 - p["hits"].as_f64().unwrap() / p["requests"].as_f64().unwrap()).collect()
    };
    for (shards, full) in miss_ratios(0).iter().zip(miss_ratios(1)) {
        assert!((shards - full).abs() < 0.02, "shards at 50%: {shards} vs full {full}");
    }
}

/// An empty trace is refused by analyze as by sim, not reported as all zeros.
#[test]
fn analyze_refuses_an_empty_trace_as_sim_does() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let path = empty.to_str().unwrap();
    for cmd in ["sim", "analyze"] {
        let err = failure(&hearth(&[cmd, path]));
        assert!(err.contains("empty.txt holds no requests"), "{cmd}: {err}");
    }
}

/// Errors say their cause once, in words (issues 15 and 47): a missing file
/// (whatever its name), a directory, a file named .zst that is not zstd.
#[test]
fn trace_errors_say_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.csv.zst");
    std::fs::write(&plain, "version,time,op,size,lbn\n").unwrap();
    let directory = dir.path().to_str().unwrap().to_string();
    for (args, says) in [
        (vec!["sim", "nosuch.csv"], "nosuch.csv: cannot open: No such file or directory"),
        // Not "cannot tell the trace format", whatever the name.
        (vec!["trace", "stats", "nosuch"], "nosuch: cannot open: No such file or directory"),
        (vec!["analyze", "nosuch.bin"], "nosuch.bin: cannot open: No such file or directory"),
        (vec!["sim", &directory, "--format", "text"], "is a directory, not a trace file"),
        (vec!["sim", plain.to_str().unwrap()], "not zstd-compressed data"),
    ] {
        let err = failure(&hearth(&args));
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
        let cause = says.rsplit(": ").next().unwrap();
        assert_eq!(err.matches(cause).count(), 1, "the cause is said once: {err}");
    }
}

/// Parameterised specs get rows of their own, and the table's columns line
/// up however long their names are.
#[test]
fn parameterised_specs_get_their_own_aligned_rows() {
    let trace = repo_file("data/cloudPhysicsIO.csv.zst");
    let out = stdout(&hearth(&["sim", &trace, "-q", "-p", "mq,mq:m=4,lifetime=100", "-s", "1%"]));
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("MQ")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows[1].starts_with("MQ:m=4,lifetime=100 "), "{out}");
    let column = |l: &str| l.find(" MiB").unwrap();
    assert_eq!(column(rows[0]), column(rows[1]), "{out}");
}

#[test]
fn advise_recommends_what_the_simulator_measures() {
    let trace = repo_file("data/cloudPhysicsIO.csv.zst");
    let text = stdout(&hearth(&["advise", &trace, "--cache-size", "10%", "--policy", "lru", "-p", "arc,s3fifo", "-q"]));
    let sim = stdout(&hearth(&["sim", &trace, "-p", "lru,arc,s3fifo", "-s", "10%,20%", "--json", "-q"]));
    let rows: serde_json::Value = serde_json::from_str(&sim).unwrap();
    let ratio = |policy: &str, nth_size: usize| {
        let sizes: Vec<u64> = rows.as_array().unwrap().iter().map(|r| r["cache_bytes"].as_u64().unwrap()).collect();
        let mut distinct = sizes.clone();
        distinct.dedup();
        let r = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == policy && r["cache_bytes"].as_u64() == Some(distinct[nth_size]))
            .unwrap();
        100.0 * r["hits"].as_f64().unwrap() / r["requests"].as_f64().unwrap()
    };
    // The table is the simulator's numbers, the configured policy first.
    // Its columns are named as hit ratios at each size.
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("policy") && lines[0].matches("hit ratio at ").count() == 2, "{text}");
    for (line, policy) in lines[1..4].iter().zip(["LRU", "ARC", "S3-FIFO"]) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        let want = [policy.to_string(), format!("{:.2}%", ratio(policy, 0)), format!("{:.2}%", ratio(policy, 1))];
        assert_eq!(cells, want, "{text}");
    }
    // The recommendation names the best at the size and its gain over LRU.
    let best = ["LRU", "ARC", "S3-FIFO"].into_iter().max_by(|a, b| ratio(a, 0).total_cmp(&ratio(b, 0))).unwrap();
    let want = format!("{best} at ");
    let recommendation = lines.iter().find(|l| l.starts_with(&want)).unwrap_or_else(|| panic!("{text}"));
    assert!(recommendation.contains(&format!("({:+.1} points over LRU)", ratio(best, 0) - ratio("LRU", 0))), "{text}");
    assert!(recommendation.contains("; doubling to "), "{text}");
    assert!(recommendation.contains(&format!(": hit ratio {:.1}% (", ratio(best, 0))), "{text}");
}

/// `--sample-seed N` draws another sample: shards and mini on the trace with
/// seed N give what they give, at seed 0, on a copy whose keys are renamed
/// by draw N, both where an oracleGeneral file is sampled before decoding
/// and where a trace is decoded and filtered (text). Another seed samples
/// other keys; exact and full do not sample and do not change.
#[test]
fn a_sample_seed_draws_the_sample_of_a_renamed_trace() {
    use hearth_trace::sample::KeyRenaming;
    let dir = tempfile::tempdir().unwrap();
    let renaming = KeyRenaming::for_seed(7);
    let oracle = shared("cloudPhysicsIO.oracleGeneral.bin");
    let mut records = std::fs::read(&oracle).unwrap();
    for record in records.chunks_exact_mut(24) {
        let key = u64::from_le_bytes(record[4..12].try_into().unwrap());
        record[4..12].copy_from_slice(&renaming.rename(key).to_le_bytes());
    }
    let renamed_oracle = dir.path().join("renamed.oracleGeneral.bin");
    std::fs::write(&renamed_oracle, records).unwrap();
    // A skewed text trace: 30,000 reads of 3,000 ids, the low ones hot.
    let mut x = 1u64;
    let ids: Vec<u64> = (0..30_000)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 33) % 3000) * ((x >> 20) % 3000) / 3000
        })
        .collect();
    let write_ids = |name: &str, f: &dyn Fn(u64) -> u64| {
        let path = dir.path().join(name);
        std::fs::write(&path, ids.iter().map(|&k| format!("{}\n", f(k))).collect::<String>()).unwrap();
        path
    };
    let (text, renamed_text) = (write_ids("ids.txt", &|k| k), write_ids("renamed.txt", &|k| renaming.rename(k)));

    // The curves without their times, and without the seed their sampled ones carry past 0.
    let curves = |trace: &str, methods: &str, seed: &str| -> serde_json::Value {
        let args = ["mrc", trace, "-q", "-m", methods, "-p", "lru,arc", "--rate", "10%", "-s", "1%,10%,50%"];
        let out = stdout(&hearth(&[&args[..], &["--sample-seed", seed, "--json"]].concat()));
        let mut curves: serde_json::Value = serde_json::from_str(&out).unwrap();
        for c in curves.as_array_mut().unwrap() {
            let c = c.as_object_mut().unwrap();
            c.remove("seconds");
            let sampled = c["method"] == "shards" || c["method"] == "mini";
            let want = (sampled && seed != "0").then(|| serde_json::json!(seed.parse::<u64>().unwrap()));
            assert_eq!(c.remove("sample_seed"), want, "{trace}: {seed}");
        }
        curves
    };
    for (trace, renamed) in [(oracle.as_str(), path(&renamed_oracle)), (path(&text), path(&renamed_text))] {
        let drawn = curves(trace, "shards,mini", "7");
        assert_eq!(drawn, curves(renamed, "shards,mini", "0"), "{trace}: draw 7 is the renamed trace's sample");
        assert_ne!(drawn, curves(trace, "shards,mini", "0"), "{trace}: draw 7 samples other keys than draw 0");
        assert_eq!(curves(trace, "exact,full", "7"), curves(trace, "exact,full", "0"), "{trace}");
    }
    let args = ["mrc", &oracle, "-q", "-m", "shards,full", "--rate", "10%", "-s", "10%", "--sample-seed", "7"];
    let table = stdout(&hearth(&args));
    assert!(table.contains("LRU shards 10% seed 7: mean absolute error"), "{table}");
    // Every row names its draw, so rows of several draws put together stay apart.
    let rows: Vec<Vec<&str>> = table.lines().take(3).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0][..3], ["method", "rate", "seed"], "{table}");
    assert_eq!(rows[1][..3], ["shards", "10%", "7"], "{table}");
    assert_eq!(rows[2][..3], ["full", "100%", "-"], "{table}");
    let csv = stdout(&hearth(&[&args[..], &["--csv"]].concat()));
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0][..3], ["method", "rate", "seed"], "{csv}");
    assert_eq!(rows[1][..3], ["shards", "0.1", "7"], "{csv}");
    assert_eq!(rows[2][..3], ["full", "1", ""], "{csv}");
    let seed_0 = stdout(&hearth(&["mrc", &oracle, "-q", "-m", "shards", "--rate", "10%", "-s", "10%", "--csv"]));
    assert!(seed_0.lines().nth(1).unwrap().starts_with("shards,0.1,0,"), "{seed_0}");
}

#[test]
fn policies_lists_the_groups_a_policy_list_may_name() {
    let out = stdout(&hearth(&["policies"]));
    let (listed, groups) = out.split_once("\ngroups").expect("a groups section");
    let names: Vec<&str> = listed.lines().filter_map(|l| l.split_whitespace().next()).collect();
    let group = |g: &str| -> Vec<String> {
        let line = groups.lines().find(|l| l.starts_with(g)).unwrap_or_else(|| panic!("no {g} line in:\n{groups}"));
        line.split_whitespace().nth(1).unwrap().split(',').map(str::to_string).collect()
    };
    let all = group("all");
    assert_eq!(all, names.iter().filter(|n| !n.starts_with('+')).map(|n| n.to_string()).collect::<Vec<_>>());
    let (classic, modern, learned) = (group("classic"), group("modern"), group("learned"));
    assert!(classic.iter().any(|p| p == "lru") && modern.iter().any(|p| p == "s3fifo"), "{groups}");
    assert_eq!(learned, ["glcache", "lrb", "3lcache"], "{groups}");
    assert_eq!(classic.len() + modern.len() + learned.len(), all.len(), "classic, modern and learned partition all");
}

#[test]
fn sim_json_and_csv_report_training_time_for_learned_policies_only() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("hot-between-scans.txt");
    // 200 hot blocks, each between two blocks of a scan: enough evictions
    // for small batches to train several models.
    let mut lines = String::new();
    for round in 0..30 {
        for i in 0..200 {
            lines += &format!("{i}\n{}\n{}\n", 10_000 + round * 400 + 2 * i, 10_001 + round * 400 + 2 * i);
        }
    }
    std::fs::write(&trace, lines).unwrap();
    let policies = "lru,arc+tinylfu,3lcache:batch=256,lrb:batch=256,lrb:batch=256+tinylfu,glcache";
    let out = stdout(&hearth(&["sim", trace.to_str().unwrap(), "-q", "-p", policies, "-s", "400", "--json"]));
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for row in &rows[..2] {
        assert!(row.get("train_seconds").is_none(), "not a learned policy: {row}");
    }
    for row in &rows[2..] {
        let seconds = row["train_seconds"].as_f64().unwrap_or_else(|| panic!("no train_seconds: {row}"));
        assert!(seconds >= 0.0, "{row}");
    }
    // These two trained (a model takes a measurable time); GL-Cache's
    // first training needs a capacity's worth of evictions.
    assert!(rows[2]["train_seconds"].as_f64().unwrap() > 0.0, "{}", rows[2]);
    assert!(rows[3]["train_seconds"].as_f64().unwrap() > 0.0, "{}", rows[3]);
    // The CSV has the column on every row: empty for a policy that does not
    // learn, the seconds for one that does.
    let csv = stdout(&hearth(&["sim", trace.to_str().unwrap(), "-q", "-p", policies, "-s", "400", "--csv"]));
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.last(), Some(&"train_seconds"), "{csv}");
    // Quoted policy labels may hold commas: the cell is the row's last.
    let cells: Vec<&str> = lines.map(|l| l.rsplit(',').next().unwrap()).collect();
    assert_eq!(cells.len(), 6, "{csv}");
    assert_eq!(cells[..2], ["", ""], "{csv}");
    for cell in &cells[2..] {
        let seconds: f64 = cell.parse().unwrap_or_else(|_| panic!("train_seconds {cell:?}: {csv}"));
        assert!(seconds >= 0.0, "{csv}");
    }
    assert!(cells[2].parse::<f64>().unwrap() > 0.0, "{csv}");
}

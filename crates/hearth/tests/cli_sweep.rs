//! `hearth sweep FILE`: the table equals `hearth sim --json` over the same
//! traces, policies and sizes.

mod cli_support;
use cli_support::*;

use serde_json::Value;

/// Three traces (two files beside the sweep file, named relative to it,
/// and a synthetic workload), four policies, four sizes.
fn setup(dir: &std::path::Path, output: &str) -> (std::path::PathBuf, Vec<String>) {
    std::fs::create_dir_all(dir.join("traces")).unwrap();
    let ids = |n: u64, m: u64| (0..n).map(|i| format!("{}\n", (i * i + i / 7) % m)).collect::<String>();
    std::fs::write(dir.join("traces/a.txt"), ids(30_000, 1009)).unwrap();
    std::fs::write(dir.join("traces/b.txt"), ids(20_000, 4001)).unwrap();
    let file = dir.join("sweep.toml");
    std::fs::write(
        &file,
        format!(
            r#"traces = ["traces/a.txt", "traces/b.txt", "synth:zipf:5000:0.9"]
policies = ["lru", "arc", "mq:m=4,lifetime=1000", "opt"]
sizes = "1%,5%,10%,256KiB"
warmup = "10%"
requests = 50000
output = "{output}"
workers = 2
"#
        ),
    )
    .unwrap();
    let traces = ["traces/a.txt", "traces/b.txt"]
        .iter()
        .map(|t| path(&dir.join(t)).to_string())
        .chain(["synth:zipf:5000:0.9".to_string()])
        .collect();
    (file, traces)
}

fn sim_json(traces: &[String]) -> Value {
    let mut args = vec!["sim"];
    args.extend(traces.iter().map(String::as_str));
    args.extend([
        "-p",
        "lru,arc,mq:m=4,lifetime=1000,opt",
        "-s",
        "1%,5%,10%,256KiB",
        "--warmup",
        "10%",
        "--requests",
        "50000",
        "--json",
        "-q",
    ]);
    serde_json::from_str(&stdout(&hearth(&args))).unwrap()
}

#[test]
fn sweep_json_equals_sim_json_for_the_same_traces_policies_and_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let (file, traces) = setup(dir.path(), "out/table.json");
    std::fs::create_dir_all(dir.path().join("out")).unwrap();
    let o = hearth(&["sweep", path(&file), "-q"]);
    stdout(&o);
    let got: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out/table.json")).unwrap()).unwrap();
    let want = sim_json(&traces);
    assert_eq!(got.as_array().unwrap().len(), 3 * 4 * 4);
    assert_eq!(got, want);
}

#[test]
fn sweep_csv_has_the_json_columns_and_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (file, traces) = setup(dir.path(), "table.csv");
    // --output and --threads override the file's.
    let csv_path = dir.path().join("other.csv");
    stdout(&hearth(&["sweep", path(&file), "-q", "--threads", "3", "-o", path(&csv_path)]));
    assert!(!dir.path().join("table.csv").exists());
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("trace,policy,cache_bytes,requests,hits,bytes,hit_bytes,hit_ratio,miss_ratio,byte_hit_ratio,byte_miss_ratio,train_seconds")
    );
    let want = sim_json(&traces);
    let want = want.as_array().unwrap();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), want.len());
    for (line, w) in rows.iter().zip(want) {
        // Strings with a comma (a policy's parameters, `MQ:m=4,lifetime=1000`) are quoted.
        let s = |k: &str| match w[k].as_str() {
            Some(t) if t.contains(',') => format!("\"{t}\""),
            Some(t) => t.to_string(),
            None => w[k].to_string(),
        };
        let counts = ["trace", "policy", "cache_bytes", "requests", "hits", "bytes", "hit_bytes"].map(s);
        let ratios = ["hit_ratio", "miss_ratio", "byte_hit_ratio", "byte_miss_ratio"]
            .map(|k| format!("{:.6}", w[k].as_f64().unwrap()));
        // No policy here learns: its training-time cell is empty.
        assert!(w.get("train_seconds").is_none(), "{w}");
        let expect = [counts.join(","), ratios.join(","), String::new()].join(",");
        assert_eq!(*line, expect);
    }
    // The old name of --threads still works and says so.
    let old = dir.path().join("old.csv");
    let o = hearth(&["sweep", path(&file), "-q", "--workers", "3", "-o", path(&old)]);
    stdout(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("note: --workers is deprecated: use --threads"));
    assert_eq!(std::fs::read_to_string(&old).unwrap(), csv);
    // Without an output anywhere, the table goes to stdout.
    let bare = dir.path().join("bare.toml");
    std::fs::write(&bare, "traces = \"synth:loop:100\"\npolicies = \"lru\"\nsizes = \"50blocks\"\nrequests = 1000\n")
        .unwrap();
    let out = stdout(&hearth(&["sweep", path(&bare), "-q"]));
    assert_eq!(
        out,
        "trace,policy,cache_bytes,requests,hits,bytes,hit_bytes,hit_ratio,miss_ratio,byte_hit_ratio,byte_miss_ratio,train_seconds\n\
         synth:loop:100,LRU,204800,1000,0,4096000,0,0.000000,1.000000,0.000000,1.000000,\n"
    );
}

#[test]
fn bad_sweep_files_are_refused_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "traces = \"synth:scan\"\npolicies = \"lru,belady2\"\nsizes = \"1%\"\n").unwrap();
    let err = failure(&hearth(&["sweep", path(&file), "-q"]));
    assert!(err.contains("bad.toml") && err.contains("unknown policy \"belady2\""), "{err}");
    std::fs::write(&file, "traces = \"synth:scan\"\npolicies = \"lru\"\nsizes = \"1%\"\noutput = \"x.parquet\"\n")
        .unwrap();
    assert!(failure(&hearth(&["sweep", path(&file), "-q"])).contains("from Python"));
    let err = failure(&hearth(&["sweep", path(&dir.path().join("missing.toml"))]));
    assert!(err.contains("missing.toml"), "{err}");
    std::fs::write(&file, "traces = [\"nope.txt\"]\npolicies = \"lru\"\nsizes = \"1MiB\"\n").unwrap();
    let err = failure(&hearth(&["sweep", path(&file), "-q"]));
    assert!(err.contains("nope.txt"), "{err}");
}

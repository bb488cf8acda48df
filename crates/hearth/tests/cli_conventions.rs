//! One vocabulary across commands (docs/GUIDE.md, "Flag conventions"):
//! durations carry their unit in the value, shares are percentages, one name
//! per idea. Each renamed flag's old spelling gives the same output with a
//! one-line note; bare numbers where a unit is needed are refused with a
//! hint.

mod cli_support;
use cli_support::*;

use std::process::Output;

/// Runs `hearth` with `common` then `extra`.
fn run(common: &[&str], extra: &[&str]) -> Output {
    hearth(&[common, extra].concat())
}

/// The new spelling runs silently; the old one gives the same output and
/// notes each old flag.
fn same_output_with_notes(common: &[&str], new: &[&str], old: &[&str], notes: &[&str]) -> String {
    let (new, old) = (run(common, new), run(common, old));
    let out = stdout(&new);
    assert_eq!(out, stdout(&old), "the old spelling means the same");
    assert!(new.stderr.is_empty(), "{}", String::from_utf8_lossy(&new.stderr));
    let stderr = String::from_utf8_lossy(&old.stderr);
    for note in notes {
        assert!(stderr.contains(note), "missing {note:?} in:\n{stderr}");
    }
    assert_eq!(stderr.lines().count(), notes.len(), "one line per old flag:\n{stderr}");
    out
}

const TWO_LEVEL: &[&str] = &[
    "sim",
    "synth:zipf:2000:0.9",
    "--requests",
    "20000",
    "-q",
    "-p",
    "lru",
    "-s",
    "10%",
    "--client-cache",
    "5%",
    "--placement",
    "ac",
    "--json",
];

#[test]
fn sim_interarrival_takes_a_duration_and_the_microsecond_flag_still_works() {
    let out = same_output_with_notes(
        TWO_LEVEL,
        &["--interarrival", "8ms"],
        &["--interarrival-us", "8000"],
        &["hearth: note: --interarrival-us is deprecated: use --interarrival 8000us"],
    );
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(rows[0]["device"].is_object(), "the misses were timed: {out}");
    let err = failure(&run(TWO_LEVEL, &["--interarrival", "8000"]));
    assert!(err.contains("duration \"8000\" has no unit: use 8000s or 8000000ms"), "{err}");
}

#[test]
fn a_negative_size_is_called_negative() {
    let err = failure(&hearth(&["sim", "synth:loop:100", "--requests", "1000", "-q", "-s", "-5MiB"]));
    assert!(err.contains("size \"-5MiB\" is negative"), "{err}");
    assert!(!err.contains("-- -5"), "no clap tip about '--': {err}");
}

const CHAINS: &[&str] = &["tier", "sim", "synth:chains", "--requests", "4000", "--os-cache", "1MiB", "--json"];

#[test]
fn tier_flags_take_units_and_percentages_and_the_old_ones_still_work() {
    same_output_with_notes(
        CHAINS,
        &["--think", "10ms", "--train", "40%", "--fast-size", "20%"],
        &["--think-ms", "10", "--train", "0.4", "--fast-capacity", "20%"],
        &[
            "note: --think-ms is deprecated: use --think 10ms",
            "note: --train 0.4 is read as 40%; write shares as percentages (--train 40%)",
            "note: --fast-capacity is deprecated: use --fast-size",
        ],
    );
    let err = failure(&run(CHAINS, &["--think", "10"]));
    assert!(err.contains("use 10s or 10000ms"), "{err}");
    let err = failure(&run(CHAINS, &["--train", "50"]));
    assert!(err.contains("write 50% for a percentage"), "{err}");
}

#[test]
fn tier_sim_prints_devices_in_human_units() {
    let out = stdout(&hearth(&["tier", "sim", "synth:chains", "--requests", "2000", "--schemes", "slow"]));
    // The built-in SSD and HDD, not "75000 ns, 250000000 B/s".
    assert!(out.contains("(75 µs, 250 MB/s), slow device 5.4 ms, 163 MB/s"), "{out}");
}

const PREFETCH: &[&str] =
    &["prefetch", "sim", "--workload", "rubis", "--clients", "10", "--transactions", "200", "--json"];

#[test]
fn prefetch_sim_speaks_the_common_vocabulary_and_the_old_flags_still_work() {
    let out = same_output_with_notes(
        PREFETCH,
        &[
            "--schemes",
            "none;borg",
            "--cache-size",
            "20%",
            "--prefetch-fraction",
            "8%",
            "--warmup",
            "20%",
            "--device-latency",
            "100us",
        ],
        &[
            "-s",
            "none;borg",
            "--cache",
            "20%",
            "--prefetch-fraction",
            "0.08",
            "--warmup",
            "0.2",
            "--device-latency-us",
            "100",
        ],
        &[
            "note: -s is deprecated: use --schemes",
            "note: --cache is deprecated: use --cache-size",
            "note: --prefetch-fraction 0.08 is read as 8%",
            "note: --warmup 0.2 is read as 20%",
            "note: --device-latency-us is deprecated: use --device-latency 100us",
        ],
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert!(results[0]["timing"].is_object(), "reads were timed: {out}");
}

#[test]
fn a_ctx_trace_is_an_argument_and_the_old_flag_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("w.ctx");
    let trace = path(&trace);
    stdout(&hearth(&[
        "prefetch",
        "gen",
        "--workload",
        "rubis",
        "--clients",
        "5",
        "--transactions",
        "100",
        "-o",
        trace,
    ]));
    let common = ["prefetch", "analyze", "--json"];
    same_output_with_notes(
        &common,
        &[trace],
        &["--trace", trace],
        &["note: --trace is deprecated: use the TRACE argument"],
    );
}

#[test]
fn serve_timeouts_take_units_in_whole_seconds() {
    // A bare number is still seconds, with a note (the bad port then stops the server).
    let o = hearth(&[
        "serve",
        "--backend",
        "memory",
        "--size",
        "1MiB",
        "--handshake-timeout",
        "30",
        "--listen",
        "127.0.0.1:99999",
    ]);
    let err = failure(&o);
    assert!(err.contains("note: --handshake-timeout 30 is read as 30s; write durations with a unit"), "{err}");
    let o = hearth(&["serve", "--backend", "memory", "--size", "1MiB", "--idle-timeout", "1500ms"]);
    let err = failure(&o);
    assert!(err.contains("--idle-timeout counts whole seconds (got 1.5 s)"), "{err}");
    // Durations in the export flags go through the same parser.
    let o = hearth(&["serve", "--backend", "memory", "--size", "1MiB", "--latency", "2"]);
    let err = failure(&o);
    assert!(err.contains("duration \"2\" has no unit: use 2s or 2000ms"), "{err}");
}

#[test]
fn every_flag_has_help_and_no_default_is_a_build_path() {
    let bench = stdout(&hearth(&["bench", "sim", "--help"]));
    assert!(!bench.contains(env!("CARGO_MANIFEST_DIR")), "{bench}");
    let serve = stdout(&hearth(&["serve", "--help"]));
    assert!(serve.contains("What the export stores its data in") && serve.contains("[default: file]"), "{serve}");
    for cmd in [&["bench", "sim"][..], &["prefetch", "sim"], &["prefetch", "replay"], &["prefetch", "analyze"]] {
        let help = stdout(&hearth(&[cmd, &["-h"]].concat()));
        for line in help.lines().filter(|l| l.trim_start().starts_with('-')) {
            // `  --flag <VALUE>   help text`: something after the flag and its value.
            let rest = line.trim_start().split("  ").filter(|s| !s.trim().is_empty()).count();
            assert!(rest >= 2, "{cmd:?}: no help for {line:?}");
        }
    }
}

#[test]
fn a_curve_of_one_size_is_not_drawn_but_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("mrc");
    let o =
        hearth(&["sim", "synth:loop:100", "--requests", "1000", "-q", "-p", "lru", "-s", "10%", "--mrc", path(&base)]);
    stdout(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("warning:") && err.contains("not written: every series has a single point"), "{err}");
    assert!(!base.with_extension("png").exists() && !base.with_extension("svg").exists());
}

#[test]
fn every_command_stops_quietly_when_its_reader_has_gone() {
    // `hearth ... | head` once head has exited: standard output is a pipe with no reader left.
    let vscsi = shared("cloudPhysicsIO.vscsi");
    let zipf = &["synth:zipf:2000:0.9", "--requests", "20000"];
    let commands: &[&[&str]] = &[
        &["trace", "stats", &vscsi],
        &["trace", "head", &vscsi, "-n", "100000"],
        &["policies"],
        &[&["sim"], &zipf[..], &["-q", "-p", "lru,arc", "-s", "10%"]].concat(),
        &[&["sim"], &zipf[..], &["-q", "-p", "lru,arc", "-s", "10%", "--json"]].concat(),
        &[&["mrc"], &zipf[..], &["-q", "--json"]].concat(),
        &[&["analyze"], &zipf[..]].concat(),
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth")).args(*args).stdout(writer).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.is_empty(), "hearth {args:?}: {}\n{stderr}", out.status);
    }
}

#[test]
fn analyze_and_trace_head_take_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let plots = dir.path().join("plots");
    let zipf = &["synth:zipf:2000:0.9", "--requests", "20000", "-q"];
    for args in
        [&[&["analyze"], &zipf[..], &["--plots", path(&plots)]].concat(), &[&["trace", "head"], &zipf[..]].concat()]
    {
        let o = hearth(args);
        stdout(&o);
        assert!(o.stderr.is_empty(), "hearth {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(plots.join("request_sizes.svg").exists());
}

/// A plot path that cannot be written fails as the command line is read (here
/// before the missing trace is even opened), saying why in one line.
#[test]
fn plot_paths_are_checked_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taken");
    std::fs::write(&file, "").unwrap();
    let (file, dir, under_file) = (path(&file), path(dir.path()), format!("{}/sub/mrc", path(&file)));
    for (args, says) in [
        (vec!["analyze", "nosuch.csv", "--plots", file], format!("{file} is a file; give a directory")),
        (vec!["warmup", "sim", "nosuch.csv", "--plots", file], format!("{file} is a file; give a directory")),
        (vec!["sim", "nosuch.csv", "--mrc", dir], format!("{dir} is a directory; the plot is written to PATH.svg")),
        (vec!["mrc", "nosuch.csv", "--plot", &under_file], format!("{file} is a file, so no directory can be made")),
    ] {
        let err = failure(&hearth(&args));
        assert!(err.contains(&says) && !err.contains("nosuch"), "{args:?}: {err}");
    }
}

/// A bare fraction (libCacheSim's share of the footprint) or a byte count
/// below one block is refused with the spelling meant; a bare whole number
/// stays bytes where it can be (a text trace's objects are 1 byte each).
#[test]
fn sizes_without_units_are_refused_with_a_hint() {
    let zipf = ["sim", "synth:zipf:2000:0.9", "--requests", "2000", "-q", "-p", "lru", "-s"];
    for (size, says) in [
        ("0.01,0.1", r#"cache size "0.01" has no unit: write 0.01 of the footprint as 1%"#),
        ("1.5", r#"cache size "1.5" has no unit: write 1.5MiB, 1.5GiB or 1.5%"#),
        ("100", "cache size 100 B holds no 4 KiB block: give a unit (as 100MiB) or blocks (100blocks)"),
    ] {
        let err = failure(&run(&zipf, &[size]));
        assert!(err.contains(says) && err.lines().count() == 1, "-s {size}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, "1\n2\n1\n3\n1\n").unwrap();
    let out = stdout(&hearth(&["sim", path(&keys), "-q", "-p", "lru", "-s", "2", "--json"]));
    assert!(out.contains("\"cache_bytes\": 2"), "{out}");
}

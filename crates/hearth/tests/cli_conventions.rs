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

/// Every flag name with the one meaning it has in every command that takes
/// it: (name, kind of value, value name in --help, meaning). The kind is read
/// from the flag's value parser and value name (see `kind`); a switch has no
/// value name. A flag added to any command needs a line here, and a name
/// reused for another idea fails below.
const MEANINGS: &[(&str, &str, &str, &str)] = &[
    ("access-log", "path", "PATH", "log of every client read and write, as a CloudPhysics CSV trace"),
    ("adaptive-partition", "switch", "", "size the prefetch partition as the traffic goes"),
    ("admin", "switch", "", "serve POST /mode on the metrics address"),
    ("admin-token-file", "path", "FILE", "file with the token POST /mode must carry"),
    ("allow", "word", "CIDR", "client address or CIDR block allowed to connect"),
    ("backend", "word", "BACKEND", "what an export stores its data in"),
    ("background-reads", "count", "N", "background reads in flight at once"),
    ("bandwidth", "rate", "RATE", "bytes per second of a simulated slow backend"),
    ("block-size", "size", "SIZE", "the cache's block size"),
    ("bs", "size", "SIZE", "bytes per request of a load generator, as fio's --bs"),
    ("budget", "share", "PERCENT", "warmup budget, a share of the previous period's working set"),
    ("cache-device", "path", "PATH", "file or block device of the second cache level"),
    ("cache-device-discard-damaged", "switch", "", "start over a damaged cache device, dropping what cannot be read"),
    ("cache-device-size", "size", "SIZE", "bytes of the cache device to use"),
    ("cache-device-write-back", "switch", "", "the cache device holds writes as dirty blocks"),
    ("cache-size", "size", "SIZE", "the size of the one cache"),
    ("cdp", "word", "CDP", "prefetching on top of a tier scheme"),
    ("cdp-max", "count", "CDP_MAX", "prefetch reads per demand request, at most"),
    ("ceiling", "size", "SIZES", "cache sizes at which to sort misses by what could predict them"),
    ("client-cache", "word", "SIZE[:POLICY]", "a client buffer cache above the storage cache"),
    ("clients", "count", "CLIENTS", "concurrent clients of a generated workload"),
    ("columns", "word", "SPEC", "which column of a CSV or binary trace holds what"),
    ("config", "path", "PATH", "the server's TOML configuration"),
    ("csv", "switch", "", "print the results as CSV"),
    ("days", "count", "DAYS", "days of synth:bonfire to generate"),
    ("deny", "word", "CIDR", "client address or CIDR block refused"),
    ("description", "word", "TEXT", "an export's description"),
    ("device-latency", "duration", "DURATION", "latency of a simulated device, per read"),
    ("devices", "path", "DEVICES", "TOML file of user-defined devices"),
    ("direct", "switch", "", "open the backing file with O_DIRECT"),
    ("dirty-limit", "size", "SIZE", "dirty bytes that trigger a write-back flush"),
    ("dirty-max-age", "duration", "DURATION", "how long dirty data waits before it is cleaned"),
    ("duration", "duration", "DURATION", "how long a load generator issues requests"),
    ("explain", "word", "SCHEME", "the prefetch scheme whose missed predictable misses to sort by reason"),
    ("export-storage-trace", "path", "PATH", "where to write the storage-level trace below client caches"),
    ("fast", "word", "FAST", "the fast device, by name"),
    ("fast-size", "size", "SIZE", "the fast device's size"),
    ("format", "word", "FORMAT", "a trace's format, when its name does not tell"),
    ("group", "word", "GROUP", "the group the server switches to once set up"),
    ("handshake-timeout", "duration", "DURATION", "time a client may take over its handshake"),
    ("idle-plot", "path", "PATH", "where to plot idle distances (PATH.svg, PATH.png)"),
    ("idle-timeout", "duration", "DURATION", "time a connection may stay idle"),
    ("ignore-dirty-cache-device", "switch", "", "serve a backend without the cache device holding its writes"),
    ("ignore-obj-size", "switch", "", "count every object of a trace as size 1"),
    ("interarrival", "duration", "DURATION", "time between storage requests, for timing misses"),
    (
        "interval",
        "duration",
        "DURATION",
        "a span of time: between refreshes (top), of one hit-ratio point (warmup sim)",
    ),
    ("iodepth", "count", "IODEPTH", "requests each connection keeps in flight, as fio's --iodepth"),
    ("jobs", "count", "JOBS", "connections of a load generator, a thread each"),
    ("json", "switch", "", "print the results as JSON"),
    ("latency", "duration", "DURATION", "latency added to each backend call"),
    ("lines", "count", "N", "requests to print"),
    ("listen", "word", "ADDR", "TCP address to listen on"),
    ("log", "word", "FILTER", "log filter"),
    ("lookahead", "count", "LOOKAHEAD", "reads ahead of a context's demand to predict"),
    ("max-client-buffers", "count", "N", "client buffers one connection may name in hints"),
    ("max-connections", "count", "N", "client connections served at once"),
    ("max-request", "size", "SIZE", "largest read or write accepted"),
    ("method", "word", "METHOD", "the one method to use"),
    ("methods", "word", "METHODS", "methods to run, comma-separated"),
    ("metrics", "word", "ADDR", "address of the Prometheus endpoint"),
    ("mode", "word", "MODE", "block or object caching of a trace"),
    ("mrc", "path", "PATH", "where to plot miss-ratio curves (PATH.svg, PATH.png)"),
    ("name", "word", "NAME", "an export's name"),
    ("no-trim", "switch", "", "do not offer clients TRIM"),
    ("once", "switch", "", "print one view and exit"),
    ("os-cache", "size", "SIZE", "the OS page cache's size"),
    ("output", "path", "PATH", "where the output goes"),
    ("pass-through", "switch", "", "nothing enters the cache"),
    ("path", "path", "PATH", "an export's backing file or block device"),
    ("peer", "path", "PATH", "the peer benchmark script"),
    ("per-client", "switch", "", "one client cache per trace client"),
    ("period", "duration", "DURATION", "time between restarts"),
    ("pidfile", "path", "FILE", "where to write the server's process id"),
    ("placement", "word", "PLACEMENT", "when blocks enter the storage cache (ac, ev, ...)"),
    ("plot", "path", "PATH", "where to plot the results (PATH.svg, PATH.png)"),
    ("plots", "path", "DIR", "directory to write plots into"),
    ("policies", "word", "POLICIES", "replacement policies to run, comma-separated"),
    ("policy", "word", "POLICY", "the one replacement policy of a cache"),
    ("prefetch", "word", "SCHEME", "the one prefetcher of an export or of a simulated cache"),
    ("prefetch-cache", "size", "SIZE", "the prefetch cache's size"),
    ("prefetch-fraction", "share", "PERCENT", "share of the cache for prefetched blocks"),
    ("quiet", "switch", "", "no progress bar or notes on stderr"),
    ("rate", "share", "PERCENT", "sampling rate, a share of the keys"),
    ("reaccess", "switch", "", "the re-access analysis"),
    ("read-ahead", "count", "READ_AHEAD", "blocks the OS reads ahead"),
    ("read-only", "switch", "", "every export read-only"),
    ("reads-only", "switch", "", "skip the workload's writes"),
    ("regions", "size", "SIZES", "region sizes for pre-loading"),
    ("repeat", "count", "REPEAT", "runs per policy"),
    ("requests", "count", "REQUESTS", "requests of a generated (synth:) workload"),
    ("rules", "switch", "", "also count mined rules"),
    ("run", "word", "CMD", "a command to run once serving (captive mode)"),
    ("rw", "word", "RW", "a load generator's I/O pattern, as fio's --rw"),
    ("sample-seed", "count", "N", "which sample of the keys to draw"),
    ("schemes", "word", "SCHEMES", "schemes to compare (prefetchers, fast-device schemes)"),
    ("seed", "count", "SEED", "seed of a generated workload"),
    ("seq-throughput", "rate", "RATE", "sequential read bandwidth of a pre-load"),
    ("sequential-cutoff", "size", "SIZE", "sequential stream length past which reads bypass the cache"),
    ("server", "word", "SERVER", "the NBD server to drive"),
    ("shards-hot-keys", "count", "N", "hot keys SHARDS tracks exactly"),
    ("shards-items", "count", "N", "items fixed-size SHARDS tracks"),
    ("size", "size", "SIZE", "an export's size"),
    ("sizes", "size", "SIZES", "cache sizes, a comma-separated list"),
    ("slow", "word", "SLOW", "the slow device, by name"),
    ("speed", "number", "SPEED", "how many times faster than recorded to replay"),
    ("sweep-clients", "count", "SWEEP_CLIENTS", "client counts to sweep"),
    ("think", "duration", "DURATION", "time added between consecutive requests"),
    ("thn", "count", "THN", "convergence threshold: intervals without violation"),
    ("threads", "count", "N", "worker threads"),
    ("thv", "share", "PERCENT", "violation threshold, in hit-ratio points"),
    ("tier-access-log", "path", "PATH", "old name of --access-log"),
    ("tier-fast-path", "path", "PATH", "the fast tier's file"),
    ("tier-fast-size", "size", "SIZE", "the fast tier's size"),
    ("tier-idle", "duration", "DURATION", "client quiet time before migrating"),
    ("tier-journal", "path", "PATH", "the fast tier's journal"),
    ("tier-migrate-bandwidth", "rate", "RATE", "bytes per second of tier migration"),
    ("tier-plan", "path", "PATH", "a partition plan to migrate"),
    ("tls", "word", "MODE", "TLS off, on or required"),
    ("tls-certificates", "path", "DIR", "directory of TLS certificates"),
    ("tls-identity", "word", "DN", "the TLS client subject an export is served to"),
    ("tls-psk", "path", "FILE", "TLS pre-shared keys file"),
    ("tls-verify-peer", "switch", "", "require client certificates"),
    ("train", "share", "PERCENT", "leading share of a trace used for training"),
    ("transactions", "count", "TRANSACTIONS", "contexts of a generated workload"),
    ("unix", "path", "PATH", "Unix socket to listen on"),
    ("upstream", "word", "URI", "the NBD server behind an nbd backend"),
    ("upstream-connections", "count", "N", "connections to the upstream"),
    ("upstream-timeout", "duration", "DURATION", "how long one upstream call may take"),
    ("user", "word", "USER", "the user the server switches to once set up"),
    ("warmup", "warmup", "N|P%", "leading requests replayed but not counted: a count or a share"),
    ("warmup-budget", "size", "SIZE", "most bytes to pre-load from a warmup log"),
    ("warmup-log", "path", "PATH", "the warmup log's file or block device"),
    ("warmup-log-size", "size", "SIZE", "size of a warmup log file"),
    ("warmup-mode", "word", "WARMUP_MODE", "what a warmup log holds: metadata or data"),
    ("warmup-preload", "switch", "", "pre-load the cache from the warmup log"),
    ("warmup-staging", "size", "SIZE", "staging buffer of the warmup log"),
    ("what-if", "word", "POLICY", "a policy the live advice shadows"),
    ("window", "count", "N", "a number of consecutive requests"),
    ("window-plot", "path", "PATH", "where to plot the miss ratio of each window (PATH.svg, PATH.png)"),
    ("workload", "word", "WORKLOAD", "the workload to generate"),
    ("write-around", "switch", "", "write-around cache mode"),
    ("write-back", "switch", "", "write-back cache mode"),
];

/// What kind of value a flag of `hearth __flags` takes, from its parser's
/// type and its value name; `Err` names a value name its type contradicts.
fn kind(flag: &serde_json::Value) -> Result<&'static str, String> {
    let value = flag["value"].as_str().unwrap();
    let name = flag["value_name"].as_str().unwrap_or("");
    let typed = |kind, types: &[&str]| {
        if types.contains(&value) {
            Ok(kind)
        } else {
            Err(format!("value name {name} with a {value} parser"))
        }
    };
    // Sizes, rates and durations the server's configuration reads arrive as text.
    match (value, name) {
        ("switch", _) => Ok("switch"),
        (_, "DURATION") => typed("duration", &["duration", "string"]),
        (_, "SIZE" | "SIZES") => typed("size", &["u64", "string"]),
        (_, "RATE") => typed("rate", &["u64"]),
        (_, "PERCENT") => typed("share", &["f64", "string"]),
        (_, "N|P%") => typed("warmup", &["warmup"]),
        ("path", _) => Ok("path"),
        ("u64" | "u32" | "u16" | "usize", _) => Ok("count"),
        ("f64", _) => Ok("number"),
        (_, "N") => Err(format!("value name N with a {value} parser")),
        _ => Ok("word"),
    }
}

/// `hearth __flags`: one JSON object per flag of every command.
fn all_flags() -> Vec<serde_json::Value> {
    stdout(&hearth(&["__flags"])).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// One meaning per flag name across every command (docs/GUIDE.md, "Flag
/// conventions"): each flag of each command, walked through clap, takes the
/// kind of value and value name of its line in `MEANINGS`, and a short option
/// stands for one long name. `-- --nocapture` prints the table.
#[test]
fn every_flag_name_has_one_meaning_across_commands() {
    let flags = all_flags();
    assert!(flags.len() > 250, "the walk reached every command: {} flags", flags.len());
    let mut problems = Vec::new();
    let mut commands: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    let mut shorts: std::collections::BTreeMap<String, &str> = Default::default();
    for f in &flags {
        let (long, command) = (f["long"].as_str().unwrap(), f["command"].as_str().unwrap());
        let at = format!("hearth {command} --{long}");
        let Some(&(_, want_kind, want_name, _)) = MEANINGS.iter().find(|m| m.0 == long) else {
            problems.push(format!("{at}: not in MEANINGS; give it a line (or use a name that is)"));
            continue;
        };
        commands.entry(long).or_default().push(command.to_string());
        match kind(f) {
            Ok(k) if k != want_kind => problems.push(format!("{at}: takes a {k}, but --{long} is a {want_kind}")),
            Err(e) => problems.push(format!("{at}: {e}")),
            Ok(_) => {}
        }
        let name = f["value_name"].as_str().unwrap_or("");
        if want_kind != "switch" && name != want_name {
            problems.push(format!("{at}: value name {name}, but --{long} takes {want_name}"));
        }
        if f["help"].as_str().unwrap().trim().is_empty() {
            problems.push(format!("{at}: no help"));
        }
        if let Some(short) = f["short"].as_str() {
            let first = *shorts.entry(short.to_string()).or_insert(long);
            if first != long {
                problems.push(format!("{at}: -{short} is already --{first}"));
            }
        }
    }
    for (name, ..) in MEANINGS {
        if !commands.contains_key(name) {
            problems.push(format!("--{name} is in MEANINGS but no command takes it"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    println!("{:<30} {:<9} {:<14} meaning (commands)", "flag", "kind", "value");
    for (name, kind, value, meaning) in MEANINGS {
        let mut on = commands[name].clone();
        on.dedup();
        let on = if on.len() > 4 { format!("{} commands", on.len()) } else { on.join(", ") };
        println!("--{name:<28} {kind:<9} {value:<14} {meaning} ({on})");
    }
}

/// The renamed flags: `sim --interval N` is `--window N` (with a note), and
/// the names that meant something else elsewhere are refused, naming the
/// new one.
#[test]
fn renamed_flags_name_their_new_spelling() {
    let zipf = ["sim", "synth:zipf:2000:0.9", "--requests", "20000", "-q", "-p", "lru", "-s", "10%", "--json"];
    same_output_with_notes(
        &zipf,
        &["--window", "5000"],
        &["--interval", "5000"],
        &["hearth: note: --interval is deprecated: use --window"],
    );
    let err = failure(&run(&zipf, &["--interval", "10s"]));
    assert!(err.contains("--interval"), "{err}");
    for (args, says) in [
        (
            &["serve", "--backend", "memory", "--size", "1MiB", "--warmup-log", "/nonexistent/log", "--warmup"][..],
            "--warmup is now --warmup-preload",
        ),
        (&["warmup", "inspect", "/nonexistent/log", "--budget", "1MiB"], "--budget is now --warmup-budget"),
        (&["warmup", "inspect", "/nonexistent/log", "--mode", "data"], "--mode is now --warmup-mode"),
    ] {
        let err = failure(&hearth(args));
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `--warmup` is one idea in `sim` and `prefetch`: a count or a share of the
/// leading requests, replayed uncounted.
#[test]
fn warmup_takes_a_count_or_a_share_in_sim_and_prefetch() {
    let zipf = ["sim", "synth:zipf:2000:0.9", "--requests", "20000", "-q", "-p", "lru", "-s", "10%", "--json"];
    let counted = |args: &[&str]| -> u64 {
        let rows: serde_json::Value = serde_json::from_str(&stdout(&run(&zipf, args))).unwrap();
        rows[0]["requests"].as_u64().unwrap()
    };
    assert_eq!(counted(&["--warmup", "5000"]), 15000);
    assert_eq!(counted(&["--warmup", "25%"]), 15000);
    let prefetch = ["prefetch", "analyze", "--workload", "rubis", "--clients", "5", "--transactions", "100"];
    let share = stdout(&run(&prefetch, &["--ceiling", "10%", "--warmup", "50%"]));
    assert!(share.contains("warm-up 50%"), "{share}");
    let count = stdout(&run(&prefetch, &["--ceiling", "10%", "--warmup", "10"]));
    assert!(count.contains("warm-up 0%") || count.contains("warm-up 1%"), "{count}");
}

/// Rates carry `/s` and a unit, decimal or binary, as output prints them.
#[test]
fn rates_take_units_per_second() {
    // 20 blocks each 60 s "day": the pre-load of 80 KiB takes 80 s at 1 KiB/s.
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("version,time,op,size,lbn\n");
    for s in 0..180u64 {
        csv.push_str(&format!("1,{},28,4096,{}\n", 1000 + s, (s % 20) * 8));
    }
    let trace = dir.path().join("days.csv");
    std::fs::write(&trace, csv).unwrap();
    let warmup = ["warmup", "sim", path(&trace), "-q", "--sizes", "20blocks", "--regions", "4KiB", "--period", "60s"];
    let binary = stdout(&run(&warmup, &["--seq-throughput", "1KiB/s"]));
    assert_eq!(binary, stdout(&run(&warmup, &["--seq-throughput", "1024B/s"])));
    assert_ne!(binary, stdout(&run(&warmup, &["--seq-throughput", "1kB/s"])), "kB is 1000 bytes");
    let old = run(&warmup, &["--seq-throughput", "1KiB"]);
    assert_eq!(stdout(&old), binary, "a size without /s is per second");
    let note = String::from_utf8_lossy(&old.stderr);
    assert!(note.contains("note: --seq-throughput 1KiB is read as 1KiB/s"), "{note}");
    let err = failure(&run(&warmup, &["--seq-throughput", "100"]));
    assert!(err.contains(r#"rate "100" has no unit: write 100MB/s or 100MiB/s"#), "{err}");
    for flag in ["--bandwidth", "--tier-migrate-bandwidth"] {
        let err = failure(&hearth(&["serve", "--backend", "memory", "--size", "1MiB", flag, "250"]));
        assert!(err.contains("write 250MB/s or 250MiB/s"), "{flag}: {err}");
    }
    // Accepted with units: the server then stops at the bad port, not at the rate.
    let o = hearth(&[
        "serve",
        "--backend",
        "memory",
        "--size",
        "1MiB",
        "--bandwidth",
        "250MB/s",
        "--listen",
        "127.0.0.1:99999",
    ]);
    let err = failure(&o);
    assert!(!err.contains("bandwidth") && !err.contains("rate"), "{err}");
}

/// Checks every object under `v` that counts hits (`"hits": N`) carries
/// `hit_ratio` and `miss_ratio`, fractions of its requests that sum to 1;
/// returns how many it checked.
fn ratios_named_alike(v: &serde_json::Value, at: &str) -> usize {
    match v {
        serde_json::Value::Object(o) => {
            let mut checked = 0;
            if o.get("hits").is_some_and(serde_json::Value::is_u64) {
                let (hit, miss) =
                    (o.get("hit_ratio").and_then(|r| r.as_f64()), o.get("miss_ratio").and_then(|r| r.as_f64()));
                let (Some(hit), Some(miss)) = (hit, miss) else {
                    panic!("{at}: hits without hit_ratio and miss_ratio: {v}")
                };
                assert!((0.0..=1.0).contains(&hit) && (hit + miss - 1.0).abs() < 1e-9, "{at}: {v}");
                checked += 1;
            }
            // A series (`warmup sim`): a ratio per interval beside the counts, null where none were counted.
            if let (Some(hits), Some(requests)) =
                (o.get("hits").and_then(|h| h.as_array()), o.get("requests").and_then(|r| r.as_array()))
            {
                let ratios = |name: &str| {
                    o.get(name)
                        .and_then(|r| r.as_array())
                        .unwrap_or_else(|| panic!("{at}: hits[] without {name}[]: {v}"))
                };
                let (hit_ratio, miss_ratio) = (ratios("hit_ratio"), ratios("miss_ratio"));
                assert!(hit_ratio.len() == hits.len() && miss_ratio.len() == hits.len(), "{at}: {v}");
                for (i, (h, r)) in hits.iter().zip(requests).enumerate() {
                    let (h, r) = (h.as_u64().unwrap(), r.as_u64().unwrap());
                    if r == 0 {
                        assert!(hit_ratio[i].is_null() && miss_ratio[i].is_null(), "{at}: interval {i}: {v}");
                    } else {
                        let (hit, miss) = (hit_ratio[i].as_f64().unwrap(), miss_ratio[i].as_f64().unwrap());
                        assert!(
                            (hit - h as f64 / r as f64).abs() < 1e-12 && (hit + miss - 1.0).abs() < 1e-9,
                            "{at}: {v}"
                        );
                    }
                }
                checked += 1;
            }
            for (k, x) in o {
                assert!(!k.contains("hit_rate") && !k.contains("miss_rate") && !k.contains("hit_percent"), "{at}: {k}");
                checked += ratios_named_alike(x, at);
            }
            checked
        }
        serde_json::Value::Array(a) => a.iter().map(|x| ratios_named_alike(x, at)).sum(),
        _ => 0,
    }
}

/// Tables that show ratios as percentages still name them: `prefetch sim`'s
/// miss ratio, and its hit ratio split into the main cache's hits and
/// promotes, which add up to the JSON's `hit_ratio`.
#[test]
fn prefetch_table_names_its_miss_ratio_and_the_parts_of_its_hit_ratio() {
    let run = ["prefetch", "sim", "--workload", "rubis", "--clients", "5", "--transactions", "100"];
    let table = stdout(&hearth(&run));
    let header: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(header[..5], ["scheme", "miss", "ratio%", "main", "hit%"], "{table}");
    let json: serde_json::Value = serde_json::from_str(&stdout(&hearth(&[&run[..], &["--json"]].concat()))).unwrap();
    let row: Vec<&str> = table.lines().nth(2).unwrap().split_whitespace().collect();
    let stats = &json["results"][0]["stats"];
    let (miss, main, promote): (f64, f64, f64) =
        (row[1].parse().unwrap(), row[2].parse().unwrap(), row[3].parse().unwrap());
    assert!((miss - 100.0 * stats["miss_ratio"].as_f64().unwrap()).abs() < 0.006, "{table}\n{json}");
    assert!((main + promote - 100.0 * stats["hit_ratio"].as_f64().unwrap()).abs() < 0.011, "{table}\n{json}");
}

/// Hit and miss ratios carry the same names in every command's JSON and CSV
/// (docs/GUIDE.md, "Flag conventions"): `hit_ratio` and `miss_ratio`, as
/// fractions, beside the counts they come from.
#[test]
fn every_json_and_csv_names_hit_and_miss_ratios_alike() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = dir.path().join("sweep.toml");
    std::fs::write(
        &sweep,
        "traces = \"synth:loop:100\"\npolicies = \"lru,arc\"\nsizes = \"50blocks\"\nrequests = 1000\n",
    )
    .unwrap();
    // Three one-minute days of reads, for `warmup sim`'s restarts.
    let days = dir.path().join("days.csv");
    let mut csv = String::from("version,time,op,size,lbn\n");
    for t in 0..180u64 {
        csv += &format!("1,{},28,4096,{}\n", 1000 + t, (t % 20) * 8);
    }
    std::fs::write(&days, csv + "1,1180,28,4096,0\n").unwrap();
    let zipf = ["synth:zipf:2000:0.9", "--requests", "5000", "-q"];
    let warmup =
        ["warmup", "sim", path(&days), "-q", "--json", "--sizes", "20blocks", "--interval", "5s", "--period", "60s"];
    let json: &[&[&str]] = &[
        &warmup,
        &[&["sim"], &zipf[..], &["-p", "lru,arc", "-s", "10%", "--json"]].concat(),
        &[&["sim"], &zipf[..], &["-p", "lru", "-s", "10%", "--client-cache", "5%", "--json"]].concat(),
        &[&["mrc"], &zipf[..], &["-m", "exact,shards", "--json"]].concat(),
        &["sweep", path(&sweep), "-q", "--json"],
        &["prefetch", "sim", "--workload", "rubis", "--clients", "5", "--transactions", "100", "--json"],
    ];
    for args in json {
        let v: serde_json::Value = serde_json::from_str(&stdout(&hearth(args))).unwrap();
        assert!(ratios_named_alike(&v, &args.join(" ")) > 0, "{args:?}: no hit counts seen: {v}");
    }
    let csv: &[&[&str]] = &[
        &[&["sim"], &zipf[..], &["-p", "lru", "-s", "10%", "--csv"]].concat(),
        &[&["mrc"], &zipf[..], &["--csv"]].concat(),
        &["sweep", path(&sweep), "-q"],
    ];
    for args in csv {
        let out = stdout(&hearth(args));
        let header: Vec<&str> = out.lines().next().unwrap().split(',').collect();
        let row: Vec<&str> = out.lines().nth(1).unwrap().split(',').collect();
        let column = |name: &str| -> f64 {
            let i = header.iter().position(|&h| h == name).unwrap_or_else(|| panic!("{args:?}: no {name}: {out}"));
            row[i].parse().unwrap()
        };
        assert!((column("hit_ratio") + column("miss_ratio") - 1.0).abs() < 1e-5, "{args:?}: {out}");
    }
}

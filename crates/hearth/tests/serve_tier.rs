//! The two-tier backend live: `hearth serve` over a slow file throttled like
//! a disk and a fast file, a partition plan from `hearth tier plan` on the
//! server's own access log (or on a trace file), reads
//! replayed through python3-libnbd. Reads get faster once the plan is
//! migrated, data stays byte-identical, and a kill -9 in the middle of a
//! migration loses no acknowledged write.

mod serve_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serve_support::{have_python_nbd, pattern, run, Server, PYTHON};

const BS: usize = 4096;
const BLOCKS: usize = 2048; // an 8 MiB export
const HOT: usize = 64; // blocks, 256 KiB: exactly the fast tier

/// Block `i` of the replayed trace: 90% from a scattered hot set.
fn trace_block(i: usize) -> usize {
    if i % 10 == 9 {
        (i * 7919) % BLOCKS
    } else {
        ((i * 17) % HOT) * 31 % BLOCKS
    }
}

/// Reads the listed blocks (mean latency in seconds on stdout, data to OUT),
/// or writes PATTERN-FILE at OFFSET and flushes, or dumps the whole export.
const CLIENT: &str = r#"
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
mode = sys.argv[2]
if mode == "replay":
    blocks = [int(b) for b in open(sys.argv[3]).read().split()]
    total = 0.0
    with open(sys.argv[4], "wb") as out:
        for b in blocks:
            start = time.perf_counter()
            data = h.pread(4096, b * 4096)
            total += time.perf_counter() - start
            out.write(data)
    print(total / len(blocks))
elif mode == "write":
    h.pwrite(open(sys.argv[3], "rb").read(), int(sys.argv[4]))
    h.flush()
elif mode == "dump":
    size = h.get_size()
    with open(sys.argv[3], "wb") as out:
        for off in range(0, size, 1 << 20):
            out.write(h.pread(min(1 << 20, size - off), off))
h.shutdown()
"#;

fn client(uri: &str, args: &[&str]) -> String {
    run(Command::new(PYTHON).arg("-c").arg(CLIENT).arg(uri).args(args))
}

fn config(dir: &Path, plan: Option<&Path>, migrate_bandwidth: &str) -> std::path::PathBuf {
    let plan = plan.map_or(String::new(), |p| format!("plan = \"{}\"\n", p.display()));
    let plan = format!("{plan}access_log = \"{}/access.csv\"\n", dir.display());
    let text = format!(
        "[server]\nunix = [\"{d}/nbd.sock\"]\nlisten = []\n\n[[export]]\nname = \"disk\"\nbackend = \"file\"\npath = \"{d}/slow.img\"\n\
         cache_size = 0\nlatency = \"2ms\"\nbandwidth = \"100MiB/s\"\n\n[export.tier]\nfast_path = \"{d}/fast.img\"\nfast_size = \"256KiB\"\n\
         migrate_bandwidth = \"{migrate_bandwidth}\"\nidle = \"1ms\"\n{plan}",
        d = dir.display()
    );
    let path = dir.join("hearth.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn start(dir: &Path, cfg: &Path) -> Server {
    Server::start(&["--config", cfg.to_str().unwrap()], &dir.join("log"))
}

fn wait_for_log(server: &Server, needle: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !server.log_text().contains(needle) {
        assert!(Instant::now() < deadline, "no {needle:?} in the log:\n{}", server.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Replays the trace; returns the mean latency and checks every block read.
fn replay(dir: &Path, server: &Server, expected: &[u8]) -> f64 {
    let blocks: Vec<usize> = (0..600).map(trace_block).collect();
    let list = dir.join("blocks.txt");
    std::fs::write(&list, blocks.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(" ")).unwrap();
    let out = dir.join("replay.bin");
    let mean: f64 =
        client(&server.uri("disk"), &["replay", list.to_str().unwrap(), out.to_str().unwrap()]).trim().parse().unwrap();
    let data = std::fs::read(&out).unwrap();
    for (i, &b) in blocks.iter().enumerate() {
        assert!(data[i * BS..(i + 1) * BS] == expected[b * BS..(b + 1) * BS], "request {i}: block {b} differs");
    }
    mean
}

fn dump_matches(dir: &Path, server: &Server, expected: &[u8]) {
    let out = dir.join("dump.bin");
    client(&server.uri("disk"), &["dump", out.to_str().unwrap()]);
    assert!(std::fs::read(&out).unwrap() == expected, "the export's contents differ from what was written");
}

/// `hearth tier plan TRACE`: the 64 most accessed blocks.
fn plan_from(trace: &Path, plan: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["tier", "plan", trace.to_str().unwrap(), "--train", "100%", "--method", "freq", "--fast-size", "256KiB"])
        .args(["-o", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn write_trace_and_plan(dir: &Path) -> std::path::PathBuf {
    // CloudPhysics CSV: lbn in 512-byte sectors.
    let mut csv = String::from("version,time,op,size,lbn\n");
    for i in 0..4000 {
        csv.push_str(&format!("1,{},28,4096,{}\n", i / 100, trace_block(i) * BS / 512));
    }
    let trace = dir.join("trace.csv");
    std::fs::write(&trace, csv).unwrap();
    let plan = dir.join("plan.json");
    plan_from(&trace, &plan);
    plan
}

#[test]
fn reads_get_faster_after_plan_and_migration_with_identical_data() {
    if !have_python_nbd() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = pattern(BLOCKS * BS, 6);
    std::fs::write(d.join("slow.img"), &expected).unwrap();

    let server = start(d, &config(d, None, "4MiB/s"));
    let before = replay(d, &server, &expected);
    assert!(server.stop("TERM"));
    // The plan comes from the server's own access log of that replay.
    let plan = d.join("plan.json");
    plan_from(&d.join("access.csv"), &plan);
    let json = std::fs::read_to_string(&plan).unwrap();
    let hot: Vec<String> = (0..HOT).map(|i| (i * 31 % BLOCKS).to_string()).collect();
    assert!(hot.iter().all(|b| json.contains(&format!("[{b},"))), "the plan should hold the hot set: {json}");

    let server = start(d, &config(d, Some(&plan), "4MiB/s"));
    wait_for_log(&server, "tier migration finished", Duration::from_secs(30));
    let after = replay(d, &server, &expected);
    dump_matches(d, &server, &expected);
    assert!(server.stop("TERM"));
    eprintln!("mean read latency: {:.3} ms before migration, {:.3} ms after", before * 1e3, after * 1e3);
    // 90% of the reads now skip the 2 ms slow device.
    assert!(after < before / 2.0, "before {before} s, after {after} s");
}

#[test]
fn kill_9_during_migration_loses_no_acknowledged_write() {
    if !have_python_nbd() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut expected = pattern(BLOCKS * BS, 9);
    std::fs::write(d.join("slow.img"), &expected).unwrap();
    let plan = write_trace_and_plan(d);

    // 32 KiB/s: eight blocks a second, so the kill lands mid-plan.
    let server = start(d, &config(d, Some(&plan), "32KiB/s"));
    std::thread::sleep(Duration::from_millis(700));
    // Overwrite a run of hot blocks (some migrated, some not) and flush.
    let new = pattern(HOT * BS, 10);
    let file = d.join("new.bin");
    std::fs::write(&file, &new).unwrap();
    client(&server.uri("disk"), &["write", file.to_str().unwrap(), "0"]);
    expected[..new.len()].copy_from_slice(&new);
    std::thread::sleep(Duration::from_millis(500));
    let pid = server.pid();
    assert!(!server.stop("KILL"), "kill -9 is not a clean exit (pid {pid})");
    let journal = std::fs::read(d.join("fast.img.journal")).unwrap();
    let records = (journal.len() - 24) / 24;
    assert!(records > 0 && records < HOT, "the kill should land mid-migration, journal has {records} records");

    let server = start(d, &config(d, Some(&plan), "4MiB/s"));
    dump_matches(d, &server, &expected);
    wait_for_log(&server, "tier migration finished", Duration::from_secs(30));
    dump_matches(d, &server, &expected);
    assert!(server.stop("TERM"));
}

/// The same two-tier export from flags alone (no config file): the plan
/// migrates, the journal and access log appear, and every byte reads back
/// (through the Rust client, so this needs no external tool).
#[test]
fn tier_flags_configure_a_two_tier_export() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = pattern(BLOCKS * BS, 11);
    std::fs::write(d.join("slow.img"), &expected).unwrap();
    let plan = write_trace_and_plan(d);
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    let server = Server::start(
        &[
            "--backend",
            "file",
            "--path",
            &p("slow.img"),
            "--cache-size",
            "0",
            "--name",
            "disk",
            "--unix",
            &p("nbd.sock"),
            "--tier-fast-path",
            &p("fast.img"),
            "--tier-fast-size",
            "256KiB",
            "--tier-plan",
            plan.to_str().unwrap(),
            "--tier-idle",
            "1ms",
            "--tier-migrate-bandwidth",
            "4MiB/s",
            "--tier-access-log",
            &p("access.csv"),
        ],
        &d.join("log"),
    );
    wait_for_log(&server, "tier migration finished", Duration::from_secs(30));
    let mut c = hearth_client::Client::connect_unix(server.unix.as_ref().unwrap(), "disk").unwrap();
    for (i, chunk) in expected.chunks(1 << 20).enumerate() {
        assert!(c.read((i << 20) as u64, chunk.len() as u32).unwrap() == chunk, "MiB {i} differs");
    }
    drop(c);
    assert!(server.stop("TERM"));
    assert_eq!(std::fs::metadata(d.join("fast.img")).unwrap().len(), 256 << 10);
    let journal = std::fs::read(d.join("fast.img.journal")).unwrap();
    assert!((journal.len() - 24) / 24 >= HOT, "every planned block was mapped: {} bytes", journal.len());
    let log = std::fs::read_to_string(d.join("access.csv")).unwrap();
    assert!(log.lines().count() > 8, "client reads are logged:\n{log}");

    // A plan learned from a larger device: its blocks past the export's end are skipped, and said so.
    let mut csv = String::from("version,time,op,size,lbn\n");
    for i in 0..400 {
        csv.push_str(&format!("1,{},28,4096,{}\n", i / 100, (BLOCKS + i % 40) * BS / 512));
    }
    std::fs::write(d.join("big.csv"), csv).unwrap();
    let big_plan = d.join("big-plan.json");
    plan_from(&d.join("big.csv"), &big_plan);
    let server = Server::start(
        &[
            "--backend",
            "file",
            "--path",
            &p("slow.img"),
            "--name",
            "disk",
            "--unix",
            &p("nbd2.sock"),
            "--tier-fast-path",
            &p("fast2.img"),
            "--tier-fast-size",
            "256KiB",
            "--tier-plan",
            big_plan.to_str().unwrap(),
        ],
        &d.join("log2"),
    );
    wait_for_log(&server, "tier migration finished", Duration::from_secs(30));
    let log = server.log_text();
    assert!(log.contains("beyond the export's end") && log.contains("skipped=40"), "{log}");
    assert!(server.stop("TERM"));

    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["serve", "--backend", "memory", "--size", "1MiB", "--tier-fast-path", &p("x.img")])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--tier-fast-size"), "{err}");
}

//! Cache warmup in the real `hearth serve`: a server logs what its cache
//! loads, is restarted with and without `--warmup`, and the first N requests
//! of the cloudPhysicsIO trace, replayed by python3-libnbd, hit more often
//! with warmup while every read stays equal to the backend file.

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serve_support::{have_python_nbd, metric, run, scrape, Server, PYTHON};

/// Reads replayed per run (the trace's first N).
const N: usize = 400;
const EXPORT_BYTES: u64 = 64 << 20;
/// Largest request replayed; bigger ones are cut (keeps runs short).
const MAX_REQUEST: u64 = 64 << 10;

/// Replays `op offset length` lines; writes carry data derived from the seed
/// and the request number; every read is compared with the backend file and
/// fed to a digest. Prints `reads digest`.
const CLIENT: &str = r#"
import hashlib, os, sys
import nbd
uri, requests, backend, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
h = nbd.NBD()
h.connect_uri(uri)
fd = os.open(backend, os.O_RDONLY)
digest, reads = hashlib.sha256(), 0
for i, line in enumerate(open(requests)):
    op, offset, length = line.split()
    offset, length = int(offset), int(length)
    if op == "w":
        h.pwrite(hashlib.shake_128(b"%d:%d" % (seed, i)).digest(length), offset)
        continue
    got = h.pread(length, offset)
    if got != os.pread(fd, length, offset):
        sys.exit(f"request {i}: {length} bytes read at {offset} differ from the backend file")
    digest.update(got)
    reads += 1
h.shutdown()
print(reads, digest.hexdigest())
"#;

fn trace_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/cloudPhysicsIO.csv")
}

/// One trace request: (is_write, byte offset, length), unfolded.
fn parse(trace: &Path, line_no: usize, line: &str) -> (bool, u64, u64) {
    let at = |what: &str| format!("{}:{line_no}: bad {what} in {line:?}", trace.display());
    let f: Vec<&str> = line.split(',').collect();
    assert_eq!(f.len(), 5, "{}", at("field count"));
    let write = match f[2] {
        "28" => false,
        "2a" => true,
        other => panic!("{} ({other})", at("opcode")),
    };
    let len = f[3].parse::<u64>().unwrap_or_else(|_| panic!("{}", at("size"))).clamp(512, MAX_REQUEST);
    let sector = f[4].parse::<u64>().unwrap_or_else(|_| panic!("{}", at("lbn")));
    (write, sector * 512, len)
}

/// The trace's first N reads, with the writes among them that touch blocks
/// those reads touch (so logged data goes stale), in trace order, as
/// `r|w offset length` folded into the export. (The trace opens with
/// thousands of writes to other blocks; replaying them all would only slow
/// the test down.)
fn requests(trace: &Path) -> String {
    let text = std::fs::read_to_string(trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
    let parsed: Vec<(bool, u64, u64)> =
        text.lines().enumerate().skip(1).map(|(i, line)| parse(trace, i + 1, line)).collect();
    let blocks = |offset: u64, len: u64| offset / 4096..(offset + len).div_ceil(4096);
    let mut read_blocks = std::collections::HashSet::new();
    let mut reads = 0;
    let mut last = 0;
    for (i, &(write, offset, len)) in parsed.iter().enumerate() {
        if !write && reads < N {
            read_blocks.extend(blocks(offset, len));
            reads += 1;
            last = i;
        }
    }
    assert_eq!(reads, N, "{} has fewer than {N} reads", trace.display());
    let mut out = String::new();
    for &(write, offset, len) in &parsed[..=last] {
        if write && !blocks(offset, len).any(|b| read_blocks.contains(&b)) {
            continue;
        }
        let offset = (offset % EXPORT_BYTES).min(EXPORT_BYTES - len);
        out.push_str(&format!("{} {offset} {len}\n", if write { "w" } else { "r" }));
    }
    out
}

struct Setup {
    dir: tempfile::TempDir,
    backend: PathBuf,
    requests: PathBuf,
    log: PathBuf,
    client: PathBuf,
}

impl Setup {
    fn new(trace: &Path) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let backend = dir.path().join("disk.img");
        std::fs::write(&backend, serve_support::pattern(EXPORT_BYTES as usize, 7)).unwrap();
        let requests_path = dir.path().join("requests.txt");
        std::fs::write(&requests_path, requests(trace)).unwrap();
        let client = dir.path().join("replay.py");
        std::fs::write(&client, CLIENT).unwrap();
        let log = dir.path().join("warmup.log");
        Setup { dir, backend, requests: requests_path, log, client }
    }

    /// Starts `hearth serve` on the backend file over a 1 ms device, logging to the warmup log.
    fn serve(&self, mode: &str, warmup: bool, name: &str) -> Server {
        let sock = self.dir.path().join(format!("{name}.sock"));
        let mut args = vec![
            "--backend",
            "file",
            "--path",
            self.backend.to_str().unwrap(),
            "--cache-size",
            "64MiB",
            "--policy",
            "lru",
            "--latency",
            "1ms",
            "--unix",
            sock.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
            "--warmup-log",
            self.log.to_str().unwrap(),
            "--warmup-mode",
            mode,
            "--warmup-log-size",
            "128MiB",
        ];
        if warmup {
            args.push("--warmup-preload");
        }
        Server::start(&args, &self.dir.path().join(format!("{name}.log")))
    }

    /// Replays the requests through libnbd; returns (reads, digest) and the read hit ratio.
    fn replay(&self, server: &Server, seed: u32) -> ((u64, String), f64) {
        let out = run(Command::new(PYTHON).arg(&self.client).arg(server.uri("hearth")).args([
            self.requests.to_str().unwrap(),
            self.backend.to_str().unwrap(),
            &seed.to_string(),
        ]));
        let (reads, digest) = out.trim().split_once(' ').expect("`reads digest`");
        let page = scrape(server.metrics.as_ref().expect("metrics"));
        let hits = metric(&page, "hearth_cache_hits_total{export=\"hearth\"}");
        let misses = metric(&page, "hearth_cache_misses_total{export=\"hearth\"}");
        assert!(hits + misses > 0.0, "no reads reached the cache");
        ((reads.parse().unwrap(), digest.to_string()), hits / (hits + misses))
    }
}

/// Runs the with/without comparison for one log mode; returns the final setup for more runs.
fn warm_beats_cold(mode: &str) -> Option<Setup> {
    let trace = trace_path();
    if !trace.exists() {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{} is required under CI=true", trace.display());
        eprintln!("skipped: {} not found", trace.display());
        return None;
    }
    if !have_python_nbd() {
        return None;
    }
    let s = Setup::new(&trace);

    // The previous run: the cache loads what the trace touches (logging the
    // blocks as first read), then its writes change some of them, so the
    // first logged versions are stale. A clean stop seals the log.
    let first = s.serve(mode, false, "first");
    let (_, first_ratio) = s.replay(&first, 1);
    let first_log = first.log_text();
    assert!(first.stop("TERM"), "clean shutdown");
    assert!(first_log.contains("no warmup log") && first_log.contains("on-demand"), "{first_log}");

    // Restarted with warmup right away: blocks the previous run logged as
    // read and then overwrote must come back with their new contents.
    let warm = s.serve(mode, true, "warm");
    let page = scrape(warm.metrics.as_ref().unwrap());
    let preloaded = metric(&page, "hearth_warmup_preloaded_blocks{export=\"hearth\"}");
    let from_log = metric(&page, "hearth_warmup_preloaded_from_log_blocks{export=\"hearth\"}");
    let seconds = metric(&page, "hearth_warmup_preload_seconds{export=\"hearth\"}");
    let (warm_data, warm_ratio) = s.replay(&warm, 1);
    let warm_log = warm.log_text();
    assert!(warm.stop("TERM"));

    // Restarted cold. Replaying the same writes again changes nothing, so
    // this run starts from the same backend contents as the warm one.
    let cold = s.serve(mode, false, "cold");
    let (cold_data, cold_ratio) = s.replay(&cold, 1);
    assert!(cold.stop("TERM"));

    eprintln!(
        "{mode}: first N={N} requests, read hit ratio: previous run {first_ratio:.3}, cold restart {cold_ratio:.3}, \
         warm restart {warm_ratio:.3} ({preloaded} blocks pre-loaded in {seconds:.3} s, {from_log} from the log)"
    );
    assert!(warm_log.contains("warmup pre-load done"), "{warm_log}");
    assert!(preloaded > 0.0);
    assert!(warm_ratio > cold_ratio + 0.1, "warm {warm_ratio} vs cold {cold_ratio}");
    assert!(cold_data.0 > 0);
    assert_eq!(warm_data, cold_data, "the reads return the same bytes with and without warmup");
    // The sealed log, inspected offline, plans the same pre-load again.
    let inspect = run(Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["warmup", "inspect", "--warmup-mode", mode, "--warmup-budget", "64MiB", "--path"])
        .args([&s.backend, &s.log]));
    assert!(inspect.contains(", sealed,"), "{inspect}");
    assert!(inspect.contains(&format!(": {preloaded} blocks, {from_log} from the log")), "{inspect}");
    if mode == "data" {
        assert!(from_log > 0.0, "a sealed data log supplies blocks");
    } else {
        assert_eq!(from_log, 0.0, "a metadata log never supplies data");
    }
    Some(s)
}

#[test]
fn metadata_warmup_raises_the_hit_ratio_of_the_first_requests() {
    warm_beats_cold("metadata");
}

#[test]
fn data_warmup_raises_the_hit_ratio_and_survives_a_crash_without_stale_data() {
    let Some(s) = warm_beats_cold("data") else { return };
    // A server killed without sealing (seed 3 writes): its log's data may be
    // stale, so the next pre-load reads every block from the backend.
    let doomed = s.serve("data", true, "doomed");
    s.replay(&doomed, 3);
    assert!(!doomed.stop("KILL"));
    let after = s.serve("data", true, "after-crash");
    let page = scrape(after.metrics.as_ref().unwrap());
    let (_, ratio) = s.replay(&after, 3);
    let log = after.log_text();
    assert!(after.stop("TERM"));
    assert!(log.contains("stale"), "{log}");
    assert_eq!(metric(&page, "hearth_warmup_preloaded_from_log_blocks{export=\"hearth\"}"), 0.0);
    assert!(metric(&page, "hearth_warmup_preloaded_blocks{export=\"hearth\"}") > 0.0);
    eprintln!("data: after a crash, warm restart read hit ratio {ratio:.3} (all pre-loaded from the backend)");
}

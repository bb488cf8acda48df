//! Context-aware prefetching in the live server: a client (the pure-Python
//! hint client) runs a repeated multi-context workload — transactions that
//! each follow one of a few fixed block paths, with think time between reads
//! — against two servers over the same slow backend, one with QuickMine and
//! one without. Measured in the same run, the prefetching server's metrics
//! show promotes and a lower mean read latency. `hearth prefetch replay`
//! against a live server is the binary's: crates/hearth/tests/serve_prefetch.rs.

mod serve_support;

use std::path::Path;
use std::process::Command;

use hearth_server::config::Config;
use serve_support::{export, metric, on_unix, run, scrape, Server};

const SCRIPT: &str = r#"
import json, random, sys, time
sys.path.insert(0, sys.argv[2])
from hearth_nbd import HearthClient

BS = 4096
rng = random.Random(7)
paths = [[rng.randrange(0, 2048) for _ in range(6)] for _ in range(20)]
with HearthClient.connect_unix(sys.argv[1], "disk") as c:
    assert c.hints, "server did not accept NBD_OPT_HEARTH_HINTS"
    ctx = 0
    for rnd in range(4):
        order = list(range(len(paths)))
        rng.shuffle(order)
        for t in order:
            ctx += 1
            c.begin(ctx, t + 1)
            for b in paths[t]:
                got = c.read(b * BS, BS)
                assert got == bytes([b % 251]) * BS, f"block {b} read back wrong"
                time.sleep(0.004)  # the application thinks between reads
            c.end(ctx)
print(json.dumps({"reads": 4 * 20 * 6}))
"#;

/// Runs the workload against a server with `prefetch` (the scheme, then
/// any more flags) and returns its metrics page.
fn run_workload(dir: &Path, name: &str, prefetch: &[&str]) -> String {
    let sock = dir.join(format!("{name}.sock"));
    let image = dir.join(format!("{name}.img"));
    // Block b holds bytes b % 251, so reads can be checked.
    let data: Vec<u8> = (0..2048u64).flat_map(|b| vec![(b % 251) as u8; 4096]).collect();
    std::fs::write(&image, data).unwrap();
    let flags = ["--backend", "file", "--path", image.to_str().unwrap(), "--latency", "3ms", "--cache-size", "256KiB"];
    let flags = [&flags[..], &["--policy", "lru", "--prefetch"], prefetch].concat();
    let mut table = on_unix(&sock);
    table.metrics = Some("127.0.0.1:0".to_string());
    let server = Server::start(Config { server: table, exports: vec![export("disk", &flags)] });
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python");
    run(Command::new("python3").args(["-c", SCRIPT, sock.to_str().unwrap(), clients.to_str().unwrap()]));
    let page = scrape(server.metrics.as_ref().expect("metrics address"));
    server.stop();
    page
}

#[test]
fn quickmine_in_the_server_promotes_and_cuts_read_latency() {
    let dir = tempfile::tempdir().unwrap();
    let with = run_workload(dir.path(), "quickmine", &["quickmine"]);
    let without = run_workload(dir.path(), "none", &["none"]);
    let m = |page: &str, name: &str| metric(page, &format!("{name}{{export=\"disk\""));
    let read_mean = |page: &str| {
        let sum = metric(page, "hearth_request_duration_seconds_sum{export=\"disk\",op=\"read\"}");
        let count = metric(page, "hearth_request_duration_seconds_count{export=\"disk\",op=\"read\"}");
        sum / count
    };
    let promotes = m(&with, "hearth_prefetch_promotes_total");
    let issued = m(&with, "hearth_prefetches_total");
    assert!(promotes > 50.0, "promotes {promotes}, prefetches {issued}\n{with}");
    assert!(promotes <= issued, "{with}");
    assert_eq!(m(&without, "hearth_prefetches_total"), 0.0);
    let (fast, slow) = (read_mean(&with), read_mean(&without));
    eprintln!(
        "mean read latency: quickmine {:.3} ms, none {:.3} ms; {promotes} promotes of {issued} prefetches",
        fast * 1e3,
        slow * 1e3
    );
    assert!(fast < slow * 0.8, "prefetching should cut mean read latency: {fast} vs {slow}");
}

/// The selecting QuickMine runs its shadow caches in the server (shaped
/// after the export's cache) on the read path: reads come back right and
/// its leader's prefetches are promoted.
#[test]
fn selecting_quickmine_prefetches_in_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let page = run_workload(dir.path(), "select", &["qm-select"]);
    let m = |name: &str| metric(&page, &format!("{name}{{export=\"disk\""));
    let (promotes, issued) = (m("hearth_prefetch_promotes_total"), m("hearth_prefetches_total"));
    assert!(promotes > 50.0 && promotes <= issued, "promotes {promotes}, prefetches {issued}\n{page}");
}

/// `--adaptive-partition`: the export serves with its prefetch partition
/// sized by SARC's rule (reads checked by the client script), and its
/// prefetches are promoted.
#[test]
fn quickmine_with_an_adaptive_partition_prefetches_in_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let page = run_workload(dir.path(), "adaptive", &["quickmine", "--adaptive-partition"]);
    let m = |name: &str| metric(&page, &format!("{name}{{export=\"disk\""));
    let (promotes, issued) = (m("hearth_prefetch_promotes_total"), m("hearth_prefetches_total"));
    assert!(promotes > 50.0 && promotes <= issued, "promotes {promotes}, prefetches {issued}\n{page}");
}

//! `hearth prefetch replay` against a live QuickMine server (`hearth
//! serve`): both ends are the binary's. QuickMine in the server under a
//! context workload runs in-process: crates/hearth-server/tests/serve_prefetch.rs.

mod serve_support;

use std::process::Command;

use serve_support::{metric, run, scrape, Server};

/// `hearth prefetch replay` drives a live QuickMine server with a generated
/// workload over real NBD connections: every read and write of the trace
/// reaches the server, contexts arrive as hints (the server prefetches and
/// promotes), and an export too small for the workload is refused by name.
#[test]
fn replay_drives_a_live_server_with_a_context_workload() {
    let dir = tempfile::tempdir().unwrap();
    let hearth = env!("CARGO_BIN_EXE_hearth");
    let trace = dir.path().join("rubis.ctx");
    run(Command::new(hearth).args(["prefetch", "gen", "--workload", "rubis", "--clients", "10"]).args([
        "--transactions",
        "400",
        "-o",
        trace.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&trace).unwrap();
    let count = |tag: &str| text.lines().filter(|l| l.starts_with(tag)).count() as f64;
    let (reads, writes) = (count("R "), count("W "));
    let distinct: std::collections::HashSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("R ") || l.starts_with("W "))
        .filter_map(|l| l.split(' ').nth(3))
        .collect();
    let needed = distinct.len() * 4096;

    let serve = |name: &str, size: usize| {
        Server::start(
            &[
                "--backend",
                "memory",
                "--size",
                &size.to_string(),
                "--cache-size",
                &(needed / 10).to_string(),
                "--policy",
                "lru",
                "--prefetch",
                "quickmine",
                "--name",
                "disk",
                "--unix",
                dir.path().join(format!("{name}.sock")).to_str().unwrap(),
                "--metrics",
                "127.0.0.1:0",
            ],
            &dir.path().join(format!("{name}.log")),
        )
    };
    let replay = |server: &Server| {
        Command::new(hearth)
            .args(["prefetch", "replay", trace.to_str().unwrap(), "--speed", "20", "--warmup", "0%"])
            .args(["--json", "--server", &server.uri("disk")])
            .output()
            .unwrap()
    };

    let server = serve("ok", needed);
    let out = replay(&server);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["reads"].as_f64(), Some(reads), "{report}");
    assert_eq!(report["writes"].as_f64(), Some(writes), "{report}");
    assert_eq!(report["contexts"].as_u64(), Some(400));
    assert!(report["read_us"]["mean"].as_f64().unwrap() > 0.0);
    let page = scrape(server.metrics.as_ref().unwrap());
    assert_eq!(metric(&page, "hearth_requests_total{export=\"disk\",op=\"read\"}"), reads);
    assert_eq!(metric(&page, "hearth_requests_total{export=\"disk\",op=\"write\"}"), writes);
    assert!(metric(&page, "hearth_prefetch_promotes_total{export=\"disk\"}") > 0.0, "{page}");
    server.stop("TERM");

    let small = serve("small", needed - 4096);
    let out = replay(&small);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(&format!("serve it with --size {needed}")), "{err}");
}

//! Live advice against the simulator: a real server replays a workload's
//! reads from a real client, then its `/advice` (and `/metrics`) must agree
//! with `hearth sim` run on the same block reads — the LRU curve within 0.02
//! at five sizes, the configured policy's shadow within 0.02 of the cache's
//! measured hit ratio, and the what-if ranking equal to the simulator's
//! wherever two policies differ by more than 0.02.

mod serve_support;

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use hearth_client::Client;
use serve_support::{metric, scrape, Server};

const BS: u64 = 4096;

/// The block reads of the bundled trace, as (offset, length) requests.
fn bundled_reads() -> Vec<(u64, u32)> {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cloudPhysicsIO.csv.zst");
    hearth_trace::open(&trace, None)
        .unwrap()
        .map(|r| r.unwrap())
        .filter(|r| r.op == hearth_core::Op::Read && r.len > 0)
        .map(|r| (r.offset, r.len))
        .collect()
}

/// 4 KiB reads of a skewed synthetic workload over `blocks` blocks (a
/// fixed-seed generator: the square of a uniform draw favours low blocks).
fn skewed_reads(blocks: u64, n: usize) -> Vec<(u64, u32)> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            ((u * u * blocks as f64) as u64 * BS, BS as u32)
        })
        .collect()
}

/// `hearth sim` results on a plain trace of block ids: policy label ->
/// hit ratio, per cache size in blocks.
fn simulate(trace: &Path, policies: &str, sizes: &[u64]) -> Vec<(String, u64, f64)> {
    let sizes: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .arg("sim")
        .arg(trace)
        .args(["-p", policies, "-s", &sizes.join(","), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let ratio = r["hits"].as_f64().unwrap() / r["requests"].as_f64().unwrap();
            (r["policy"].as_str().unwrap().to_string(), r["cache_bytes"].as_u64().unwrap(), ratio)
        })
        .collect()
}

/// What `hearth top --once` shows, and the metric names the Grafana
/// dashboard (docs/grafana/hearth.json) asks for, against a live server.
fn check_top_and_dashboard(server: &Server, advice: &serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["top", server.metrics.as_ref().unwrap(), "--once", "--interval", "100ms"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let view = String::from_utf8(out.stdout).unwrap();
    let export = &advice["exports"][0];
    let since_start = format!("{:.1}% since start", 100.0 * export["measured_hit_ratio"].as_f64().unwrap());
    assert!(view.contains("export hearth: cache ") && view.contains(&since_start), "{view}");
    let sparkline: String = view.chars().filter(|c| ('▁'..='█').contains(c)).collect();
    assert_eq!(sparkline.chars().count(), 16, "one bar per curve point:\n{view}");
    for p in export["policies"].as_array().unwrap() {
        let shown = format!("{:.1}%", 100.0 * p["hit_ratio"].as_f64().unwrap());
        let table = view.lines().skip_while(|l| !l.contains("what if (same size)"));
        let line = table.skip(1).find(|l| l.trim_start().starts_with(p["policy"].as_str().unwrap())).unwrap();
        assert!(line.contains(&shown), "{line} should show {shown}");
    }
    assert!(view.contains("(now)"), "the configured policy is marked:\n{view}");

    let dashboard = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana/hearth.json");
    let dashboard: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dashboard).unwrap()).unwrap();
    let page = scrape(server.metrics.as_ref().unwrap());
    let mut asked = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        assert!(panel["title"].is_string() && panel["gridPos"]["w"].is_u64() && panel["type"].is_string());
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (i, _) in expr.match_indices("hearth_") {
                let name: String = expr[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                assert!(
                    page.contains(&format!("\n{name}{{")),
                    "the dashboard asks for {name}, which the server does not export"
                );
                asked += 1;
            }
        }
    }
    assert!(asked >= 8, "{asked}");
}

fn check_advice(name: &str, reads: &[(u64, u32)], cache_blocks: u64, policy: &str) {
    let dir = tempfile::tempdir().unwrap();
    let end = reads.iter().map(|&(o, l)| o + u64::from(l)).max().unwrap();
    let size = end.div_ceil(BS) * BS;
    let socket = dir.path().join("hearth.sock");
    let disk = dir.path().join("disk.img");
    let (size, cache) = (format!("{size}"), format!("{}", cache_blocks * BS));
    let args = ["--backend", "sparse", "--path", disk.to_str().unwrap(), "--size", &size, "--cache-size", &cache];
    let mut args = args.to_vec();
    args.extend(["--policy", policy, "--unix", socket.to_str().unwrap(), "--metrics", "127.0.0.1:0"]);
    let server = Server::start(&args, &dir.path().join("log"));
    let mut client = Client::connect_unix(&socket, "hearth").unwrap();
    let mut blocks = String::new();
    for &(offset, len) in reads {
        client.read(offset, len).unwrap();
        for b in offset / BS..(offset + u64::from(len)).div_ceil(BS) {
            blocks.push_str(&format!("{b}\n"));
        }
    }
    let plain = dir.path().join("blocks.txt");
    std::fs::write(&plain, &blocks).unwrap();

    let advice: serde_json::Value = {
        let page = scrape(&server.metrics.as_ref().unwrap().replace("/metrics", "/advice"));
        let body = page.split("\r\n\r\n").nth(1).expect("an HTTP body");
        serde_json::from_str(body).unwrap()
    };
    let export = &advice["exports"][0];
    assert_eq!(export["cache_bytes"].as_u64(), Some(cache_blocks * BS));
    // The first scrape came after all the reads: the hour and the day hold
    // them all (they count from the server's start, not from a first scrape).
    let reads = export["reads"].as_u64().unwrap();
    assert_eq!(reads, blocks.lines().count() as u64, "{name}: every block read is counted");
    for w in &export["windows"].as_array().unwrap()[1..] {
        assert_eq!(w["reads"].as_u64(), Some(reads), "{name}: the {} window: {w}", w["last"]);
    }

    // The LRU curve at five of its sizes against full LRU simulations.
    let curve = export["mrc"].as_array().unwrap();
    let points: Vec<(u64, f64)> = [1usize, 3, 5, 7, 11]
        .iter()
        .map(|&i| (curve[i]["cache_bytes"].as_u64().unwrap() / BS, curve[i]["hit_ratio"].as_f64().unwrap()))
        .collect();
    let lru = simulate(&plain, "lru", &points.iter().map(|p| p.0).collect::<Vec<_>>());
    let mut worst_curve_error: f64 = 0.0;
    for ((blocks, live), (_, _, simulated)) in points.iter().zip(&lru) {
        assert!((live - simulated).abs() <= 0.02, "{name}: LRU at {blocks} blocks: live {live:.4}, sim {simulated:.4}");
        worst_curve_error = worst_curve_error.max((live - simulated).abs());
    }

    // The configured policy's shadow against the cache itself.
    let measured = export["measured_hit_ratio"].as_f64().unwrap();
    let predictions = export["policies"].as_array().unwrap();
    let configured = predictions.iter().find(|p| p["configured"] == true).unwrap();
    let predicted = configured["hit_ratio"].as_f64().unwrap();
    assert!((predicted - measured).abs() <= 0.02, "{name}: {policy} predicted {predicted:.4}, measured {measured:.4}");
    let page = scrape(server.metrics.as_ref().unwrap());
    let error = metric(&page, "hearth_advice_prediction_error");
    assert!((error - (predicted - measured)).abs() < 1e-9, "{name}: /metrics and /advice disagree");

    // The what-if ranking against full simulations at the configured size.
    let specs: Vec<&str> = predictions.iter().map(|p| p["spec"].as_str().unwrap()).collect();
    let simulated = simulate(&plain, &specs.join(","), &[cache_blocks]);
    let sim_ratio =
        |label: &str| simulated.iter().find(|r| r.0 == label).unwrap_or_else(|| panic!("{label} in {simulated:?}")).2;
    let live: Vec<(&str, f64)> =
        predictions.iter().map(|p| (p["policy"].as_str().unwrap(), p["hit_ratio"].as_f64().unwrap())).collect();
    let mut compared = HashSet::new();
    for &(a, live_a) in &live {
        for &(b, live_b) in &live {
            let (sim_a, sim_b) = (sim_ratio(a), sim_ratio(b));
            if a < b && (sim_a - sim_b).abs() > 0.02 {
                compared.insert((a, b));
                assert_eq!(
                    live_a > live_b,
                    sim_a > sim_b,
                    "{name}: {a} vs {b}: live {live_a:.4}/{live_b:.4}, sim {sim_a:.4}/{sim_b:.4}"
                );
            }
        }
    }
    check_top_and_dashboard(&server, &advice);
    eprintln!(
        "{name}: curve off by {worst_curve_error:.4} at most; measured {measured:.4}; live {live:?}; sim {simulated:?}; {} pairs ranked",
        compared.len()
    );
}

#[test]
fn live_advice_matches_the_simulator_on_the_bundled_trace() {
    let reads = bundled_reads();
    let footprint: HashSet<u64> = reads.iter().flat_map(|&(o, l)| o / BS..(o + u64::from(l)).div_ceil(BS)).collect();
    check_advice("cloudPhysicsIO", &reads, footprint.len() as u64 / 10, "lru");
}

#[test]
fn live_advice_matches_the_simulator_on_a_sampled_synthetic_workload() {
    // 100k blocks: past the SHARDS sample's 16k, so the curve is sampled;
    // a 20k-block cache samples the shadows too.
    check_advice("skewed", &skewed_reads(100_000, 150_000), 20_000, "s3fifo");
}

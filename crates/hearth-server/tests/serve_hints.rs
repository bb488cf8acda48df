//! The cache-hint extension end to end: a Python client (clients/python,
//! standard library only) runs a small LRU buffer cache of its own and tells
//! the live server which buffer each read lands in. The server's client
//! content tracking table infers the client's evictions from reused buffers,
//! places those blocks (eviction-based placement) and reloads them; its
//! metrics must show it, and every byte read back must be right.

mod serve_support;

use std::path::Path;
use std::process::Command;

use hearth_server::config::{Config, ServerConfig};
use serve_support::{export, metric, on_unix, run, scrape, Server};

const SCRIPT: &str = r#"
import json, sys, time
sys.path.insert(0, sys.argv[2])
from hearth_nbd import HearthClient, NbdError, CMD_HEARTH_HINT

BS = 4096
def data(block):
    return bytes((block * 7 + i) % 251 for i in range(BS))

with HearthClient.connect_unix(sys.argv[1], "disk") as c:
    assert c.hints, "server did not accept NBD_OPT_HEARTH_HINTS"
    for b in range(32):
        c.write(b * BS, data(b))
    c.flush()
    # A client buffer cache of 8 slots (LRU) over 16 hot blocks, twice.
    slots, cached, lru, misses = 8, {}, [], 0
    for rnd in range(2):
        for i in range(160):
            b = (i * 5) % 16
            if b in cached:
                lru.remove(b); lru.append(b)
                continue
            if len(cached) < slots:
                slot = len(cached)
            else:
                victim = lru.pop(0)
                slot = cached.pop(victim)
            got = c.read(b * BS, BS, buffer=slot * BS)
            assert got == data(b), f"block {b} read back wrong"
            cached[b] = slot; lru.append(b); misses += 1
        time.sleep(0.3)  # let low-priority reloads land
    # An explicit eviction notice works too, and a bad one is refused.
    assert c.evicted(20 * BS, BS)
    try:
        c.evicted(1 << 40, BS)
        raise SystemExit("an eviction hint beyond the export was accepted")
    except NbdError as e:
        assert e.errno == 22, e.errno

# Without negotiating, a hint command is an unknown command (EINVAL).
with HearthClient.connect_unix(sys.argv[1], "disk") as c:
    c.hints = False
    try:
        c._request(CMD_HEARTH_HINT, length=24, payload=bytes(24))
        raise SystemExit("a hint without negotiation was accepted")
    except NbdError as e:
        assert e.errno == 22, e.errno
print(json.dumps({"client_misses": misses}))
"#;

#[test]
fn python_client_hints_drive_eviction_based_placement() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let server = Server::start(Config {
        server: ServerConfig { metrics: Some("127.0.0.1:0".into()), ..on_unix(&sock) },
        exports: vec![export(
            "disk",
            &[
                "--backend",
                "memory",
                "--size",
                "8MiB",
                "--cache-size",
                "256KiB",
                "--placement",
                "ev",
                "--policy",
                "lru",
            ],
        )],
    });
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python");
    let out = run(Command::new("python3").args(["-c", SCRIPT, sock.to_str().unwrap(), clients.to_str().unwrap()]));
    let misses: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(misses["client_misses"].as_u64().unwrap() > 100);

    let page = scrape(server.metrics.as_ref().expect("metrics address"));
    let m = |name: &str| metric(&page, &format!("{name}{{export=\"disk\"}}"));
    let evictions = m("hearth_client_evictions_total");
    let reloads = m("hearth_eviction_reloads_total");
    // 8 buffers over 16 blocks: nearly every client miss reuses a buffer.
    assert!(evictions > 100.0, "client evictions {evictions}\n{page}");
    assert!(reloads > 0.0 && reloads <= evictions, "reloads {reloads}\n{page}");
    assert!(m("hearth_placements_total") >= reloads, "{page}");
    // Evicted blocks were placed and reloaded, so later client misses hit.
    assert!(m("hearth_cache_hits_total") > 50.0, "{page}");
    assert!(server.stop(), "the server shuts down cleanly");
}

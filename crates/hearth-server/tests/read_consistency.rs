//! A large READ served from cached blocks shares their buffers with the
//! cache instead of copying them (`BlockCache::read_cached`); a write to a
//! block a reply still holds must give the cache its own copy. Here real
//! NBD clients overwrite blocks while another reads 1 MiB at a time, and
//! every block of every reply must hold one version of what each write
//! wrote, never part of one write and part of another.

mod serve_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hearth_client::Client;
use hearth_server::config::Config;
use serve_support::{export, on_unix, Server};

const BLOCK: usize = 4096;
const BLOCKS: u64 = 512; // 2 MiB
const READ: u32 = 1 << 20;
/// The part of each block the writer rewrites.
const MIDDLE: std::ops::Range<usize> = 1024..3072;

/// Block `b`'s contents at version `v`: every byte the same, and
/// different from the versions just before and after.
fn version(b: u64, v: u8) -> Vec<u8> {
    vec![(b as u8).wrapping_mul(31).wrapping_add(v.wrapping_mul(7)); BLOCK]
}

#[test]
fn overwrites_during_large_reads_never_tear_a_block() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let server = Server::start(Config {
        server: on_unix(&sock),
        exports: vec![export("disk", &["--backend", "memory", "--size", "2MiB", "--cache-size", "4MiB"])],
    });

    let mut writer = Client::connect_unix(&sock, "disk").unwrap();
    for b in 0..BLOCKS {
        writer.write(b * BLOCK as u64, &version(b, 0), false).unwrap();
    }
    let mut reader = Client::connect_unix(&sock, "disk").unwrap();
    assert_eq!(reader.read(0, READ).unwrap()[..BLOCK], version(0, 0)[..], "the first read fills the cache");

    let done = Arc::new(AtomicBool::new(false));
    let writing = {
        let done = done.clone();
        std::thread::spawn(move || {
            // The middle half of blocks the reader's replies may hold: a
            // partial write, which changes a cached buffer in place unless a
            // reply shares it (then the cache copies it first).
            let mut v = 1u8;
            while !done.load(Ordering::Relaxed) {
                for b in (0..BLOCKS).step_by(7) {
                    let middle = &version(b, v)[MIDDLE];
                    writer.write(b * BLOCK as u64 + MIDDLE.start as u64, middle, false).unwrap();
                }
                v = v.wrapping_add(1).max(1);
            }
        })
    };
    let mut checked = 0;
    for round in 0..200u64 {
        let offset = (round % 2) * u64::from(READ);
        let data = reader.read(offset, READ).unwrap();
        for (i, got) in data.chunks(BLOCK).enumerate() {
            let b = offset / BLOCK as u64 + i as u64;
            let (first, middle) = (version(b, 0), &got[MIDDLE]);
            assert_eq!(got[..MIDDLE.start], first[..MIDDLE.start], "block {b}'s head changed in round {round}");
            assert_eq!(got[MIDDLE.end..], first[MIDDLE.end..], "block {b}'s tail changed in round {round}");
            assert!(middle.iter().all(|&x| x == middle[0]), "block {b} torn in round {round}");
            checked += 1;
        }
    }
    done.store(true, Ordering::Relaxed);
    writing.join().unwrap();
    assert_eq!(checked, 200 * 256);

    assert!(server.stop(), "the server stops cleanly");
}

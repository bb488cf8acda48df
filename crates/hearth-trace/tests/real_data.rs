//! The readers against the real cloudPhysicsIO trace, which libCacheSim ships
//! in four formats: every format must tell the same story.

use std::io::Write;
use std::path::{Path, PathBuf};

use hearth_core::{Access, Op, NEVER};
use hearth_trace::{accesses, fill_next_access, open, Format, Mode, Request};

/// Requests in cloudPhysicsIO (the .csv has one header line more).
const RECORDS: usize = 113_872;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data").join(name)
}

fn read_all(path: &Path, format: Option<Format>) -> Vec<Request> {
    open(path, format).unwrap().collect::<Result<_, _>>().unwrap()
}

/// The .csv read independently of the crate: (seconds, opcode, size, lbn).
fn csv_rows() -> Vec<(u64, u8, u32, u64)> {
    let text = std::fs::read_to_string(data("cloudPhysicsIO.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            (f[1].parse().unwrap(), u8::from_str_radix(f[2], 16).unwrap(), f[3].parse().unwrap(), f[4].parse().unwrap())
        })
        .collect()
}

#[test]
fn cloudphysics_csv_reads_every_row_with_sectors_as_bytes() {
    let rows = csv_rows();
    let reqs = read_all(&data("cloudPhysicsIO.csv"), None);
    assert_eq!(reqs.len(), RECORDS);
    assert_eq!(rows.len(), RECORDS);
    for (i, (r, &(secs, opcode, size, lbn))) in reqs.iter().zip(&rows).enumerate() {
        let op = match opcode {
            0x28 => Op::Read,
            0x2a => Op::Write,
            _ => Op::Other,
        };
        let want =
            Request { time_ns: secs * 1_000_000_000, client: 0, op, offset: lbn * 512, len: size, next_access: None };
        assert_eq!(*r, want, "row {i}");
    }
    let reads = reqs.iter().filter(|r| r.op == Op::Read).count();
    assert_eq!(reads, rows.iter().filter(|r| r.1 == 0x28).count());
    assert!(reads > 0 && reads < RECORDS);
}

#[test]
fn vscsi_and_csv_agree_request_by_request() {
    let csv = read_all(&data("cloudPhysicsIO.csv"), Some(Format::CloudPhysicsCsv));
    let vscsi = read_all(&data("cloudPhysicsIO.vscsi"), None);
    assert_eq!(vscsi.len(), csv.len());
    for (i, (v, c)) in vscsi.iter().zip(&csv).enumerate() {
        assert_eq!((v.op, v.offset, v.len, v.client), (c.op, c.offset, c.len, c.client), "request {i}");
        // vscsi keeps microseconds; the csv truncated them to whole seconds.
        assert_eq!(v.time_ns / 1_000_000_000 * 1_000_000_000, c.time_ns, "request {i}");
    }
    // The vscsi clock really is finer: some requests fall inside a second.
    assert!(vscsi.iter().any(|v| v.time_ns % 1_000_000_000 != 0));
}

#[test]
fn text_ids_are_the_csv_sector_numbers() {
    let csv = csv_rows();
    let text = read_all(&data("cloudPhysicsIO.txt"), None);
    assert_eq!(text.len(), RECORDS);
    for (i, (t, row)) in text.iter().zip(&csv).enumerate() {
        assert_eq!((t.offset, t.len), (row.3, 1), "line {}", i + 1);
    }
}

#[test]
fn oracle_general_matches_csv_and_its_next_access_matches_ours() {
    let csv = csv_rows();
    let reqs = read_all(&data("cloudPhysicsIO.oracleGeneral.bin"), None);
    assert_eq!(reqs.len(), RECORDS);
    // libCacheSim's converter gives an object the size it had when first
    // seen, so later requests for the same sector with another size differ.
    let mut first_size = std::collections::HashMap::new();
    let mut resized = 0;
    for (i, (r, row)) in reqs.iter().zip(&csv).enumerate() {
        let size = *first_size.entry(row.3).or_insert(row.2);
        resized += usize::from(size != row.2);
        assert_eq!((r.time_ns, r.offset, r.len), (row.0 * 1_000_000_000, row.3, size), "record {i}");
    }
    assert!(resized > 0);
    // libCacheSim computed next-access times when it wrote the file; ours,
    // from a backward pass over the ids, must agree with every one of them.
    let mut acc: Vec<Access> = accesses(reqs.iter().copied().map(Ok), Mode::Object).collect::<Result<_, _>>().unwrap();
    fill_next_access(&mut acc);
    let never = reqs.iter().filter(|r| r.next_access.is_none()).count();
    assert!(never > 0 && never < RECORDS);
    for (i, (a, r)) in acc.iter().zip(&reqs).enumerate() {
        assert_eq!(a.next_access, r.next_access.unwrap_or(NEVER), "record {i}");
    }
}

#[test]
fn block_mode_on_the_real_trace_covers_each_request_in_whole_blocks() {
    let csv = read_all(&data("cloudPhysicsIO.csv"), None);
    let block = 4096u64;
    let acc: Vec<Access> = accesses(csv.iter().copied().map(Ok), Mode::Block { block_size: block as u32 })
        .collect::<Result<_, _>>()
        .unwrap();
    let expected: u64 = csv.iter().map(|r| (r.offset + u64::from(r.len) - 1) / block - r.offset / block + 1).sum();
    assert_eq!(acc.len() as u64, expected);
    assert!(acc.len() > csv.len(), "64 KiB requests span several 4 KiB blocks");
    assert!(acc.iter().enumerate().all(|(i, a)| a.vtime == i as u64 && a.size == 4096));
}

#[test]
fn gzip_and_zstd_inputs_read_like_the_plain_file() {
    let plain = read_all(&data("cloudPhysicsIO.csv"), None);
    let dir = tempfile::tempdir().unwrap();
    // Two gzip members back to back, as `cat a.gz b.gz` makes.
    let gz = dir.path().join("cloudPhysicsIO.csv.gz");
    let text = std::fs::read(data("cloudPhysicsIO.csv")).unwrap();
    let half = text.len() / 2 + text[text.len() / 2..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut file = std::fs::File::create(&gz).unwrap();
    for member in [&text[..half], &text[half..]] {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(member).unwrap();
        file.write_all(&enc.finish().unwrap()).unwrap();
    }
    drop(file);
    assert_eq!(read_all(&gz, None), plain);

    // The repository's bundled copy of the csv, zstd-compressed.
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cloudPhysicsIO.csv.zst");
    assert_eq!(read_all(&bundled, None), plain);

    // zstd fixtures made with the zstd CLI from the first 2000 vscsi records,
    // one as a single frame and one as two frames.
    let vscsi = read_all(&data("cloudPhysicsIO.vscsi"), None);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for name in ["head2000.vscsi.zst", "head2000_two_frames.vscsi.zst"] {
        let got = read_all(&fixtures.join(name), None);
        assert_eq!(got.len(), 2000, "{name}");
        assert_eq!(got[..], vscsi[..2000], "{name}");
    }
}

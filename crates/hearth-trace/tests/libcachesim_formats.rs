//! The libCacheSim formats (lcs in every version, twr, twrNS, valpin) and
//! the column-specified CSV and binary readers, on small files made to
//! libCacheSim's documented layouts: what each reads, and the one-line error
//! (file, place, record or line, field) for each kind of bad input.

use std::path::{Path, PathBuf};

use hearth_core::Op;
use hearth_trace::{open, open_with, Columns, Format, Request, TraceError};
use tempfile::TempDir;

fn write(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn read(path: &Path, format: Option<Format>, columns: Option<&str>) -> Result<Vec<Request>, TraceError> {
    let columns: Option<Columns> = columns.map(|c| c.parse().unwrap());
    open_with(path, format, columns.as_ref())?.collect()
}

/// The error's one line, checked to be one line.
fn error(path: &Path, format: Option<Format>, columns: Option<&str>) -> String {
    let e = read(path, format, columns).expect_err("expected an error").to_string();
    assert!(!e.contains('\n'), "{e}");
    e
}

const MAGIC: u64 = 0x1234_5678_9abc_def0;

fn lcs_header(version: u64) -> Vec<u8> {
    let mut h = vec![0u8; 8192];
    h[..8].copy_from_slice(&MAGIC.to_le_bytes());
    h[8..16].copy_from_slice(&version.to_le_bytes());
    h[8184..].copy_from_slice(&MAGIC.to_le_bytes());
    h
}

/// One lcs record of `version` (1..=8), with op 3 (set) and tenant 5 where
/// the version has them, ttl 60 and features 1, 2, ... where it has those.
fn lcs_record(version: u64, time: u32, id: u64, size: u32, next: i64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend(time.to_le_bytes());
    r.extend(id.to_le_bytes());
    let op_tenant: u32 = 3 | (5 << 8);
    match version {
        1 => r.extend(size.to_le_bytes()),
        2 => {
            r.extend(size.to_le_bytes());
            r.extend(op_tenant.to_le_bytes());
        }
        _ => {
            r.extend(i64::from(size).to_le_bytes());
            r.extend(op_tenant.to_le_bytes());
            r.extend(60u32.to_le_bytes());
        }
    }
    r.extend(next.to_le_bytes());
    let features = [0, 0, 0, 0, 1, 2, 4, 8, 16][version as usize];
    for f in 0..features {
        r.extend((f as u32 + 1).to_le_bytes());
    }
    r
}

fn lcs_file(version: u64, records: &[(u32, u64, u32, i64)]) -> Vec<u8> {
    let mut bytes = lcs_header(version);
    for &(t, id, size, next) in records {
        bytes.extend(lcs_record(version, t, id, size, next));
    }
    bytes
}

const LCS_RECORDS: [(u32, u64, u32, i64); 3] = [(10, 7, 4096, 3), (11, 8, 512, -1), (12, 7, 4096, i64::MAX)];

#[test]
fn lcs_reads_every_version_libcachesim_defines() {
    let dir = TempDir::new().unwrap();
    let sizes = [24, 28, 36, 40, 44, 52, 68, 100];
    for version in 1..=8u64 {
        let bytes = lcs_file(version, &LCS_RECORDS);
        assert_eq!(bytes.len(), 8192 + 3 * sizes[version as usize - 1], "version {version}");
        let path = write(&dir, &format!("v{version}.lcs"), &bytes);
        let reader = open(&path, None).unwrap();
        assert_eq!(reader.format(), Format::Lcs);
        let got: Vec<Request> = reader.collect::<Result<_, _>>().unwrap();
        let (op, client) = if version == 1 { (Op::Read, 0) } else { (Op::Write, 5) };
        let want = |t: u64, id, len, next| Request {
            time_ns: t * 1_000_000_000,
            client,
            op,
            offset: id,
            len,
            next_access: next,
        };
        assert_eq!(
            got,
            vec![want(10, 7, 4096, Some(2)), want(11, 8, 512, None), want(12, 7, 4096, None)],
            "version {version}"
        );
    }
}

#[test]
fn bad_lcs_headers_and_records_are_named() {
    let dir = TempDir::new().unwrap();
    let short = write(&dir, "short.lcs", &lcs_header(1)[..100]);
    assert_eq!(
        error(&short, None, None),
        format!("{}: byte 0: truncated lcs header: the file ends after 100 of its 8192 bytes", short.display())
    );
    let mut bad_start = lcs_file(1, &LCS_RECORDS);
    bad_start[0] ^= 1;
    let path = write(&dir, "start.lcs", &bad_start);
    assert!(error(&path, None, None).ends_with(
        ": byte 0: header field start_magic is 0x123456789abcdef1, not 0x123456789abcdef0: not an lcs trace"
    ));
    let mut bad_end = lcs_file(1, &LCS_RECORDS);
    bad_end[8190] = 0;
    let path = write(&dir, "end.lcs", &bad_end);
    assert!(error(&path, None, None).contains(": byte 8184: header field end_magic is"));
    for version in [0u64, 9, 1 << 40] {
        let path = write(&dir, "version.lcs", &lcs_file(version, &[]));
        assert!(
            error(&path, None, None).ends_with(&format!(
                ": byte 8: header field version is {version}; libCacheSim defines lcs versions 1 to 8"
            )),
            "{}",
            error(&path, None, None)
        );
    }
    // Cut inside the second record of a version 3 file (36-byte records).
    let v3 = lcs_file(3, &LCS_RECORDS);
    let path = write(&dir, "cut.lcs", &v3[..8192 + 36 + 20]);
    assert_eq!(
        error(&path, None, None),
        format!("{}: byte 8228: truncated record: file ends after 20 of its 36 bytes", path.display())
    );
    // A negative version-3 size, and a next access that is not later: the record and field named.
    let mut negative = lcs_header(3);
    negative.extend(lcs_record(3, 1, 1, 1, -1));
    negative.extend(lcs_record(3, 1, 2, 1, -1));
    negative[8192 + 36 + 12..8192 + 36 + 20].copy_from_slice(&(-5i64).to_le_bytes());
    let path = write(&dir, "negative.lcs", &negative);
    assert!(error(&path, None, None).ends_with(": byte 8228: record 2: obj_size -5 is negative"));
    let path = write(&dir, "next.lcs", &lcs_file(2, &[(1, 1, 1, 1)]));
    assert!(error(&path, None, None).ends_with(
        ": byte 8192: record 1: next_access_vtime 1 is not a vtime after this request's (1) and below 2^48, nor -1 for never; is this an lcs trace?"
    ));
}

fn twr_record(time: u32, id: u64, key: u32, value: u32, op: u32, namespace: Option<u16>) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend(time.to_le_bytes());
    r.extend(id.to_le_bytes());
    r.extend(((key << 22) | value).to_le_bytes());
    r.extend(((op << 24) | 3600).to_le_bytes());
    if let Some(ns) = namespace {
        r.extend(ns.to_le_bytes());
    }
    r
}

#[test]
fn twr_and_twrns_read_sizes_ops_and_namespaces() {
    let dir = TempDir::new().unwrap();
    for (name, ns) in [("c.twr", None), ("c.twrNS", Some(9u16))] {
        let mut bytes = twr_record(5, 100, 20, 300, 1, ns); // get
        bytes.extend(twr_record(6, 101, 16, 0, 1, ns)); // get of an absent value: skipped, as libCacheSim does
        bytes.extend(twr_record(7, 101, 16, 1000, 3, ns)); // set
        bytes.extend(twr_record(8, 100, 20, 0, 9, ns)); // delete
        let path = write(&dir, name, &bytes);
        let reader = open(&path, None).unwrap();
        assert_eq!(reader.format(), if ns.is_some() { Format::TwrNs } else { Format::Twr });
        let got: Vec<Request> = reader.collect::<Result<_, _>>().unwrap();
        let client = u32::from(ns.unwrap_or(0));
        let want = |t: u64, op, id, len| Request {
            time_ns: t * 1_000_000_000,
            client,
            op,
            offset: id,
            len,
            next_access: None,
        };
        assert_eq!(got, vec![want(5, Op::Read, 100, 320), want(7, Op::Write, 101, 1016), want(8, Op::Other, 100, 20)]);
        let cut = write(&dir, &format!("cut.{name}"), &bytes[..bytes.len() - 3]);
        let len = bytes.len() / 4;
        assert_eq!(
            error(&cut, None, None),
            format!(
                "{}: byte {}: truncated record: file ends after {} of its {len} bytes",
                cut.display(),
                3 * len,
                len - 3
            )
        );
    }
}

#[test]
fn valpin_reads_bare_ids() {
    let dir = TempDir::new().unwrap();
    let bytes: Vec<u8> = [3u64, 4, 3].iter().flat_map(|id| id.to_le_bytes()).collect();
    let path = write(&dir, "v.valpin", &bytes);
    let got = read(&path, None, None).unwrap();
    assert_eq!(got.iter().map(|r| (r.offset, r.len)).collect::<Vec<_>>(), vec![(3, 1), (4, 1), (3, 1)]);
    let cut = write(&dir, "cut.bin", &bytes[..20]);
    assert!(error(&cut, Some(Format::Valpin), None)
        .ends_with(": byte 16: truncated record: file ends after 4 of its 8 bytes"));
}

#[test]
fn csv_columns_read_libcachesim_and_hearth_spellings() {
    let dir = TempDir::new().unwrap();
    let text =
        "timestamp,key,size,op\n1,100,4096,get\n2,\"user,42\",512,set\n\n3.5,0x10,1,delete\n4,user;42,512,read\n";
    let path = write(&dir, "kv.csv", text.as_bytes());
    let theirs =
        read(&path, None, Some("time-col=1, obj-id-col=2, obj-size-col=3, op-col=4, delimiter=,, has-header=true"))
            .unwrap();
    // The header is guessed (more letters than digits) when not given.
    let ours = read(&path, Some(Format::Csv), Some("time=1,id=2,size=3,op=4")).unwrap();
    assert_eq!(theirs, ours);
    assert_eq!(theirs.len(), 4);
    assert_eq!(
        (theirs[0].time_ns, theirs[0].offset, theirs[0].len, theirs[0].op),
        (1_000_000_000, 100, 4096, Op::Read)
    );
    assert_eq!((theirs[1].len, theirs[1].op), (512, Op::Write));
    assert_eq!((theirs[2].time_ns, theirs[2].offset, theirs[2].op), (3_500_000_000, 16, Op::Other));
    // Text keys are hashed: the quoted key with a comma is one key, another key another object.
    assert_ne!(theirs[1].offset, theirs[3].offset);
    let tabs = write(&dir, "kv.tsv", b"7\tx\n8\ty\n7\tx\n");
    let got = read(&tabs, Some(Format::Csv), Some("obj-id-col=2, delimiter=\\t, has-header=false")).unwrap();
    assert_eq!(got[0].offset, got[2].offset);
    assert_ne!(got[0].offset, got[1].offset);
    assert!(got.iter().all(|r| r.len == 1));
}

#[test]
fn bad_csv_lines_name_the_line_column_and_field() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "t.csv", b"1,100,4096\n2,101,lots\n");
    let spec = Some("time-col=1, obj-id-col=2, obj-size-col=3, has-header=false");
    assert_eq!(
        error(&path, None, spec),
        format!("{}:2: bad field 3 (obj-size-col) \"lots\": invalid digit found in string", path.display())
    );
    let past = Some("obj-id-col=2, obj-size-col=7, has-header=false");
    assert_eq!(
        error(&path, None, past),
        format!("{}:1: the line has 3 fields; obj-size-col=7 is past them", path.display())
    );
    let time = write(&dir, "time.csv", b"-1,100,4096\n");
    assert!(
        error(&time, None, spec).ends_with(":1: bad field 1 (time-col) \"-1\": expected non-negative decimal seconds")
    );
    let key = write(&dir, "key.csv", b"1,abc,4096\n");
    let numeric = Some("obj-id-col=2, obj-id-is-num=true, has-header=false");
    assert!(error(&key, None, numeric)
        .ends_with(":1: bad field 2 (obj-id-col) \"abc\": expected a number (obj-id-is-num=true)"));
    // A csv or binary format needs columns, and columns need one of them.
    assert!(error(&path, Some(Format::Csv), None).contains("a csv trace needs a column specification"));
    assert!(error(&path, Some(Format::OracleGeneral), spec)
        .contains("a column specification is for csv and binary traces, not oracle"));
}

/// `format=<IQIHB`: time, id, size, op, pad-ish tenant byte.
fn binary_record(time: u32, id: u64, size: u32, op: u16, tenant: u8) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend(time.to_le_bytes());
    r.extend(id.to_le_bytes());
    r.extend(size.to_le_bytes());
    r.extend(op.to_le_bytes());
    r.push(tenant);
    r
}

#[test]
fn binary_columns_read_any_layout() {
    let dir = TempDir::new().unwrap();
    let mut bytes = binary_record(1, u64::MAX, 4096, 1, 7);
    bytes.extend(binary_record(2, 5, 100, 13, 8));
    let path = write(&dir, "t.bin", &bytes);
    let spec = "time-col=1, obj-id-col=2, obj-size-col=3, op-col=4, tenant-col=5, format=<IQIHB";
    let got = read(&path, None, Some(spec)).unwrap();
    let want = |t: u64, client, op, id, len| Request {
        time_ns: t * 1_000_000_000,
        client,
        op,
        offset: id,
        len,
        next_access: None,
    };
    assert_eq!(got, vec![want(1, 7, Op::Read, u64::MAX, 4096), want(2, 8, Op::Write, 5, 100)]);
    assert_eq!(read(&path, Some(Format::Binary), Some("id=2,size=3,layout=<IQIHB")).unwrap()[1].len, 100);
    // Signed fields refuse negative sizes; the record and field are named.
    let signed = "obj-id-col=2, obj-size-col=3, format=<IQiHB";
    let mut negative = binary_record(1, 1, 1, 1, 1);
    negative.extend(binary_record(1, 2, (-3i32) as u32, 1, 1));
    let path = write(&dir, "neg.bin", &negative);
    assert_eq!(
        error(&path, None, Some(signed)),
        format!("{}: byte 19: record 2: field 3 (obj-size-col): -3 is not in 0..=4294967295", path.display())
    );
    let cut = write(&dir, "cut.bin", &bytes[..30]);
    assert!(error(&cut, None, Some(spec)).ends_with(": byte 19: truncated record: file ends after 11 of its 19 bytes"));
    assert!(
        error(&cut, Some(Format::Binary), Some("obj-id-col=2")).contains("needs its record layout (format=<IQI...)")
    );
}

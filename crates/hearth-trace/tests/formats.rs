//! Every reader on small hand-made files: what it reads, and the error it
//! gives for a bad field, a truncated record, a file in another format and a
//! name it cannot place.

use std::path::{Path, PathBuf};

use hearth_core::Op;
use hearth_trace::{open, open_blkparse, Format, Request, TraceError};
use tempfile::TempDir;

fn write(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn read(path: &Path, format: Option<Format>) -> Result<Vec<Request>, TraceError> {
    open(path, format)?.collect()
}

fn read_err(path: &Path, format: Option<Format>) -> TraceError {
    read(path, format).expect_err("expected an error")
}

fn req(time_ns: u64, client: u32, op: Op, offset: u64, len: u32) -> Request {
    Request { time_ns, client, op, offset, len, next_access: None }
}

/// A vscsi version 1 record (32 bytes).
fn vscsi_v1(cmd: u8, bytes: u32, lbn: u64, ts_us: u64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend(7u32.to_le_bytes()); // sn
    r.extend(bytes.to_le_bytes());
    r.extend(1u32.to_le_bytes()); // nSG
    r.extend(u16::from(cmd).to_le_bytes());
    r.extend(0x0100u16.to_le_bytes()); // ver: version 1 in the high byte
    r.extend(lbn.to_le_bytes());
    r.extend(ts_us.to_le_bytes());
    r
}

/// A vscsi version 2 record (40 bytes).
fn vscsi_v2(cmd: u8, bytes: u32, lbn: u64, ts_us: u64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend(u16::from(cmd).to_le_bytes());
    r.extend(0x0200u16.to_le_bytes());
    r.extend(7u32.to_le_bytes()); // sn
    r.extend(bytes.to_le_bytes());
    r.extend(1u32.to_le_bytes()); // nSG
    r.extend(lbn.to_le_bytes());
    r.extend(ts_us.to_le_bytes());
    r.extend(250u64.to_le_bytes()); // response time
    r
}

fn oracle(time: u32, id: u64, size: u32, next: i64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend(time.to_le_bytes());
    r.extend(id.to_le_bytes());
    r.extend(size.to_le_bytes());
    r.extend(next.to_le_bytes());
    r
}

// ---- MSR ----

#[test]
fn msr_reads_filetime_ops_and_numbers_clients_by_first_appearance() {
    let dir = TempDir::new().unwrap();
    let path = write(
        &dir,
        "hm_0.csv",
        b"128166372003061629,hm,1,Read,383565824,32768,41286\n\
          128166372016382155,web,0,Write,3221225472,4096,1059\n\
          \n\
          128166372026382245,hm,1,write,0,512,100\n\
          128166372036382245,hm,0,READ,512,1024,100\n",
    );
    let got = read(&path, None).unwrap();
    assert_eq!(
        got,
        vec![
            req(12_816_637_200_306_162_900, 0, Op::Read, 383_565_824, 32768),
            req(12_816_637_201_638_215_500, 1, Op::Write, 3_221_225_472, 4096),
            req(12_816_637_202_638_224_500, 0, Op::Write, 0, 512),
            req(12_816_637_203_638_224_500, 2, Op::Read, 512, 1024),
        ]
    );
}

#[test]
fn msr_skips_a_header_and_names_a_bad_field() {
    let dir = TempDir::new().unwrap();
    let path = write(
        &dir,
        "x.csv",
        b"Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n1,h,0,Read,0,512,1\n2,h,0,Read,12x4,512,1\n",
    );
    let err = read_err(&path, None);
    assert_eq!(err.line(), Some(3));
    let text = err.to_string();
    assert!(text.starts_with(&format!("{}:3: ", path.display())), "{text}");
    assert!(text.contains("field 5 (Offset)") && text.contains("\"12x4\""), "{text}");

    let path = write(&dir, "y.csv", b"1,h,0,Read,0,512,1\n2,h,0,Trim,0,512,1\n");
    let text = read_err(&path, Some(Format::MsrCsv)).to_string();
    assert!(text.contains(":2: ") && text.contains("field 4 (Type)") && text.contains("Trim"), "{text}");

    let path = write(&dir, "z.csv", b"1,h,0,Read,0\n");
    let text = read_err(&path, Some(Format::MsrCsv)).to_string();
    assert!(text.contains(":1: ") && text.contains("missing field 6 (Size)"), "{text}");
}

#[test]
fn a_binary_file_given_as_a_text_format_says_so() {
    let dir = TempDir::new().unwrap();
    let mut bin = vscsi_v1(0x28, 512, 10, 5);
    bin.extend(vscsi_v1(0x28, 512, 11, 6));
    let path = write(&dir, "t.vscsi", &bin);
    for format in [Format::MsrCsv, Format::Spc, Format::CloudPhysicsCsv, Format::Text, Format::Blkparse] {
        let err = read_err(&path, Some(format));
        assert_eq!(err.line(), Some(1), "{format}");
        assert!(err.to_string().contains("binary data"), "{format}: {err}");
    }
}

// ---- blkparse ----

const BLKPARSE: &str = "\
  8,0    3        1     0.000000000  4096  Q  WS 1234 + 8 [fio]
  8,0    3        2     0.000001500  4096  G  WS 1234 + 8 [fio]
  8,0    3        3     0.000002000  4096  D  WS 1234 + 8 [fio]
  8,0    1        1     0.000120000     0  C  WS 1234 + 8 [0]
  8,0    0        4     0.500000001   777  Q   R 2048 + 256 [dd]
  8,0    0        5     0.500000002   777  M   R 2304 + 8 [dd]
  8,0    0        0     0.600000000     0  m   N cfq workload changed
  8,0    2        6     1.000000000    12  Q  DS 100 + 2048 [fstrim]
  8,0    2        7     1.100000000    12  Q FWS 0 + 0 [kworker]
  8,0    2        8     1.200000000    12  U   N [kworker] 1

CPU0 (8,0):
 Reads Queued:           1,      128KiB  Writes Queued:           0,        0KiB
Total (8,0):
Throughput (R/W): 0KiB/s / 0KiB/s
Events (8,0): 10 entries
";

#[test]
fn blkparse_keeps_queue_events_and_skips_everything_else() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "sda.blkparse", BLKPARSE.as_bytes());
    let got = read(&path, None).unwrap();
    assert_eq!(
        got,
        vec![
            req(0, 4096, Op::Write, 1234 * 512, 8 * 512),
            req(500_000_001, 777, Op::Read, 2048 * 512, 256 * 512),
            req(1_000_000_000, 12, Op::Other, 100 * 512, 2048 * 512),
            req(1_100_000_000, 12, Op::Write, 0, 0),
        ]
    );
}

#[test]
fn blkparse_can_keep_another_action() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "sda.blkparse", BLKPARSE.as_bytes());
    let completions: Vec<Request> = open_blkparse(&path, 'C').unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(completions, vec![req(120_000, 0, Op::Write, 1234 * 512, 8 * 512)]);
    let merges: Vec<Request> = open_blkparse(&path, 'M').unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(merges, vec![req(500_000_002, 777, Op::Read, 2304 * 512, 8 * 512)]);
    let Err(err) = open_blkparse(&path, 'U') else { panic!("U carries no sectors") };
    assert!(err.to_string().contains("QGIDCMFAX"), "{err}");
}

#[test]
fn blkparse_malformed_queue_line_is_an_error_naming_the_field() {
    let dir = TempDir::new().unwrap();
    let path = write(
        &dir,
        "a.blkparse",
        b"  8,0  3  1  0.000000000  4096  Q  WS 1234 + 8 [fio]\n  8,0  3  2  0.000000100  4096  Q  WS 12z4 + 8 [fio]\n",
    );
    let text = read_err(&path, None).to_string();
    assert!(text.contains(":2: ") && text.contains("sector") && text.contains("12z4"), "{text}");

    let path = write(&dir, "b.blkparse", b"8,0 3 1 0.1 4096 Q WS 1234\n");
    let text = read_err(&path, None).to_string();
    assert!(text.contains(":1: ") && text.contains("`+`"), "{text}");

    let path = write(&dir, "c.blkparse", b"8,0 3 1 0.1 4096 Q XY 1234 + 8\n");
    let text = read_err(&path, None).to_string();
    assert!(text.contains("RWBS") && text.contains("XY"), "{text}");
}

#[test]
fn blkparse_rejects_a_file_without_events() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "a.blkparse", b"version,time,op,size,lbn\n1,5,28,512,10\n");
    let err = read_err(&path, None);
    assert!(err.to_string().contains("no blkparse event lines"), "{err}");
}

// ---- vscsi ----

#[test]
fn vscsi_reads_both_record_versions() {
    let dir = TempDir::new().unwrap();
    let v1 = [vscsi_v1(0x28, 4096, 100, 1_500_000), vscsi_v1(0x2a, 512, 7, 1_500_001), vscsi_v1(0x35, 0, 0, 2_000_000)]
        .concat();
    let v2 = [vscsi_v2(0x28, 4096, 100, 1_500_000), vscsi_v2(0x2a, 512, 7, 1_500_001), vscsi_v2(0x35, 0, 0, 2_000_000)]
        .concat();
    let want = vec![
        req(1_500_000_000, 0, Op::Read, 51200, 4096),
        req(1_500_001_000, 0, Op::Write, 3584, 512),
        req(2_000_000_000, 0, Op::Other, 0, 0),
    ];
    assert_eq!(read(&write(&dir, "a.vscsi", &v1), None).unwrap(), want);
    assert_eq!(read(&write(&dir, "b.vscsi", &v2), None).unwrap(), want);
    // One record alone is enough to tell the version.
    assert_eq!(read(&write(&dir, "c.vscsi", &v2[..40]), None).unwrap(), want[..1]);
    assert_eq!(read(&write(&dir, "d.vscsi", b""), None).unwrap(), vec![]);
}

#[test]
fn vscsi_truncated_record_names_its_byte_offset() {
    let dir = TempDir::new().unwrap();
    let mut bytes = [vscsi_v1(0x28, 512, 1, 1), vscsi_v1(0x28, 512, 2, 2), vscsi_v1(0x28, 512, 3, 3)].concat();
    bytes.truncate(32 * 2 + 20);
    let path = write(&dir, "t.vscsi", &bytes);
    let mut reader = open(&path, None).unwrap();
    assert!(reader.next().unwrap().is_ok());
    assert!(reader.next().unwrap().is_ok());
    let err = reader.next().unwrap().unwrap_err();
    assert_eq!(err.byte_offset(), Some(64));
    assert_eq!(
        err.to_string(),
        format!("{}: byte 64: truncated record: file ends after 20 of its 32 bytes", path.display())
    );
    assert!(reader.next().is_none(), "a reader stops after an error");
}

#[test]
fn vscsi_rejects_other_formats_and_misaligned_records() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "a.vscsi", std::fs::read(data("cloudPhysicsIO.csv")).unwrap().as_slice());
    let err = read_err(&path, None);
    assert_eq!(err.byte_offset(), Some(0));
    assert!(err.to_string().contains("not a vscsi trace"), "{err}");

    // A record whose version byte changes mid-file.
    let mut bytes = [vscsi_v1(0x28, 512, 1, 1), vscsi_v1(0x28, 512, 2, 2), vscsi_v1(0x28, 512, 3, 3)].concat();
    bytes[64 + 15] = 0x07;
    let err = read_err(&write(&dir, "b.vscsi", &bytes), None);
    assert_eq!(err.byte_offset(), Some(64));
    assert!(err.to_string().contains("0x0700"), "{err}");
}

// ---- SPC ----

#[test]
fn spc_reads_sectors_ops_and_seconds() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "Financial1.spc", b"0,303567,3584,w,0.000000\n1,55590,3072,R,0.000026,extra\n");
    assert_eq!(
        read(&path, None).unwrap(),
        vec![req(0, 0, Op::Write, 303_567 * 512, 3584), req(26_000, 1, Op::Read, 55_590 * 512, 3072)]
    );
}

#[test]
fn spc_bad_field_names_line_and_column() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "a.spc", b"0,1,512,r,0.5\n0,1,512,x,0.6\n");
    let text = read_err(&path, None).to_string();
    assert!(text.contains(":2: ") && text.contains("field 4 (Opcode)") && text.contains("\"x\""), "{text}");
    let path = write(&dir, "b.spc", b"0,1,512,r,soon\n");
    let text = read_err(&path, None).to_string();
    assert!(text.contains(":1: ") && text.contains("field 5 (Timestamp)") && text.contains("soon"), "{text}");
}

// ---- cloudPhysics CSV ----

#[test]
fn cpcsv_maps_scsi_opcodes() {
    let dir = TempDir::new().unwrap();
    let path =
        write(&dir, "t.csv", b"version,time,op,size,lbn\n1,5,28,512,10\n1,6,0x8a,1024,11\n1,7,35,0,0\n1,8,a8,4096,1\n");
    assert_eq!(
        read(&path, None).unwrap(),
        vec![
            req(5_000_000_000, 0, Op::Read, 5120, 512),
            req(6_000_000_000, 0, Op::Write, 5632, 1024),
            req(7_000_000_000, 0, Op::Other, 0, 0),
            req(8_000_000_000, 0, Op::Read, 512, 4096),
        ]
    );
}

#[test]
fn cpcsv_bad_field_and_wrong_format() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "t.csv", b"version,time,op,size,lbn\n1,5,28,512,10\n1,6,zz,512,11\n");
    let text = read_err(&path, None).to_string();
    assert!(text.contains(":3: ") && text.contains("field 3 (op)") && text.contains("zz"), "{text}");

    // An MSR line read as cpcsv: its filetime is no version number.
    let path = write(&dir, "m.csv", b"128166372003061629,hm,1,Read,383565824,32768,41286\n");
    let text = read_err(&path, Some(Format::CloudPhysicsCsv)).to_string();
    assert!(text.contains(":1: ") && text.contains("field 1 (version)"), "{text}");
    // Were the first field small, the hostname is no time.
    let path = write(&dir, "n.csv", b"1,hm,1,Read,383565824,32768,41286\n");
    let text = read_err(&path, Some(Format::CloudPhysicsCsv)).to_string();
    assert!(text.contains(":1: ") && text.contains("field 2 (time)") && text.contains("hm"), "{text}");
}

// ---- oracleGeneral ----

#[test]
fn oracle_general_converts_next_access_to_zero_based() {
    let dir = TempDir::new().unwrap();
    let bytes = [oracle(10, 5, 100, 3), oracle(11, 6, 200, -1), oracle(12, 5, 100, i64::MAX)].concat();
    let path = write(&dir, "t.oracleGeneral.bin", &bytes);
    let got = read(&path, None).unwrap();
    let want = vec![
        Request { next_access: Some(2), ..req(10_000_000_000, 0, Op::Read, 5, 100) },
        req(11_000_000_000, 0, Op::Read, 6, 200),
        req(12_000_000_000, 0, Op::Read, 5, 100),
    ];
    assert_eq!(got, want);
}

#[test]
fn oracle_general_truncated_and_wrong_format() {
    let dir = TempDir::new().unwrap();
    let mut bytes = [oracle(1, 5, 1, -1), oracle(2, 6, 1, -1)].concat();
    bytes.pop();
    let err = read_err(&write(&dir, "t.oracleGeneral", &bytes), None);
    assert_eq!(err.to_string().split(": ").nth(1), Some("byte 24"));
    assert!(err.to_string().contains("23 of its 24 bytes"), "{err}");

    // The real csv read as oracleGeneral: the "next access" fields are text.
    let err = read_err(&data("cloudPhysicsIO.csv"), Some(Format::OracleGeneral));
    assert_eq!(err.byte_offset(), Some(0));
    assert!(err.to_string().contains("next_access_vtime"), "{err}");

    // A next access pointing backwards cannot be right.
    let bytes = [oracle(1, 5, 1, 3), oracle(2, 5, 1, 1)].concat();
    let err = read_err(&write(&dir, "u.oracleGeneral", &bytes), None);
    assert_eq!(err.byte_offset(), Some(24));
}

// ---- text ----

#[test]
fn text_ids_are_keys_and_bad_ids_name_the_line() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "t.txt", b"42\n\n 7 \r\n42\n");
    let ids: Vec<(u64, u32)> = read(&path, None).unwrap().iter().map(|r| (r.offset, r.len)).collect();
    assert_eq!(ids, vec![(42, 1), (7, 1), (42, 1)]);

    let path = write(&dir, "u.txt", b"1\n2\nthree\n");
    let err = read_err(&path, None);
    assert_eq!(err.line(), Some(3));
    assert!(err.to_string().contains("\"three\""), "{err}");
}

// ---- naming and detection ----

#[test]
fn formats_are_detected_from_names_and_csv_contents() {
    for (name, want) in [
        ("a.vscsi", Some(Format::Vscsi)),
        ("a.vscsi.zst", Some(Format::Vscsi)),
        ("Financial1.spc.gz", Some(Format::Spc)),
        ("sda.blkparse", Some(Format::Blkparse)),
        ("ids.txt", Some(Format::Text)),
        ("w.oracleGeneral.bin.zst", Some(Format::OracleGeneral)),
        ("w.oracleGeneral", Some(Format::OracleGeneral)),
        ("hm_0.csv", None),
        ("trace", None),
    ] {
        assert_eq!(Format::detect(Path::new(name)), want, "{name}");
    }
    let dir = TempDir::new().unwrap();
    for (contents, want) in [
        (&b"128166372003061629,hm,1,Read,383565824,32768,41286\n"[..], Format::MsrCsv),
        (b"0,303567,3584,w,0.000000\n", Format::Spc),
        (b"version,time,op,size,lbn\n1,5,28,512,10\n", Format::CloudPhysicsCsv),
    ] {
        let path = write(&dir, "x.csv", contents);
        assert_eq!(open(&path, None).unwrap().format(), want);
    }
    for name in ["msr", "blkparse", "vscsi", "spc", "oracle", "text", "cpcsv"] {
        assert_eq!(name.parse::<Format>().unwrap().to_string(), name);
    }
    assert!(Format::OracleGeneral.is_object_trace() && Format::Text.is_object_trace());
    assert!(!Format::Vscsi.is_object_trace());
}

#[test]
fn unknown_names_and_unrecognised_csv_list_the_formats() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "trace.dat", b"1,2,3\n");
    let Err(err) = open(&path, None) else { panic!("opened an unknown format") };
    let text = err.to_string();
    assert!(text.contains("unknown file extension"), "{text}");
    assert!(text.contains("msr, blkparse, vscsi, spc, oracle, text, cpcsv"), "{text}");

    let path = write(&dir, "odd.csv", b"a,b,c\n");
    let Err(err) = open(&path, None) else { panic!("opened an unrecognised csv") };
    assert!(err.to_string().contains("matches none of msr, spc, cpcsv"), "{err}");

    let Err(err) = open(&dir.path().join("missing.vscsi"), None) else { panic!("opened a missing file") };
    assert!(err.to_string().contains("cannot open"), "{err}");

    let err = "oracl".parse::<Format>().unwrap_err();
    assert!(err.to_string().contains("known formats: msr, blkparse"), "{err}");
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data").join(name)
}

/// Found by fuzzing (fuzz/regressions/trace_zst): a corrupt zstd frame whose
/// decoder, read again after its error, indexes an empty FSE table (ruzstd
/// 0.7). Every format gets a clear error naming the file, not a panic.
#[test]
fn a_corrupt_zstd_frame_is_an_error_not_a_panic() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz/corrupt-frame.trace.zst");
    for format in Format::ALL {
        let err = match open(&path, Some(format)) {
            Ok(reader) => reader.collect::<Result<Vec<_>, _>>().expect_err("a corrupt trace reads as an error"),
            Err(e) => e,
        };
        let text = err.to_string();
        assert!(text.contains("corrupt-frame.trace.zst"), "{format:?}: {text}");
    }
}

/// A file named .zst that is not zstd, a truncated one and a corrupt one
/// fail with a plain sentence naming the file and the compressed byte where
/// decoding stopped (no line was read: ruzstd holds back a frame's first
/// window), not the decoder's debug output.
#[test]
fn zstd_errors_read_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.csv.zst");
    std::fs::write(&plain, "version,time,op,size,lbn\n1,0.0,28,4096,0\n").unwrap();
    let bundled =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cloudPhysicsIO.csv.zst")).unwrap();
    let truncated = dir.path().join("truncated.csv.zst");
    let half = bundled.len() / 2;
    std::fs::write(&truncated, &bundled[..half]).unwrap();
    let corrupt = dir.path().join("corrupt.csv.zst");
    let mut flipped = bundled.clone();
    flipped[half..half + 64].fill(0xff);
    std::fs::write(&corrupt, &flipped).unwrap();
    for (path, at, says) in [
        (&plain, Some(0), "compressed byte 0: read error: not zstd-compressed data"),
        (&truncated, Some(half as u64), "the file ends inside a compressed frame (truncated?)"),
        (&corrupt, None, "zstd: corrupt compressed data"),
    ] {
        let err = match hearth_trace::open(path, Some(Format::CloudPhysicsCsv)) {
            Err(e) => e,
            Ok(reader) => reader.collect::<Result<Vec<_>, _>>().expect_err("an unreadable trace is an error"),
        };
        let text = err.to_string();
        assert!(text.contains(path.file_name().unwrap().to_str().unwrap()) && text.contains(says), "{text}");
        assert!(!text.contains("Error {") && !text.contains("BadMagicNumber"), "{text}");
        assert!(matches!(err.place(), hearth_trace::Place::Compressed(_)), "{text}");
        let offset = err.byte_offset().unwrap();
        match at {
            Some(at) => assert_eq!(offset, at, "{text}"),
            None => assert!(offset > half as u64 && offset <= bundled.len() as u64, "{text}"),
        }
    }
}

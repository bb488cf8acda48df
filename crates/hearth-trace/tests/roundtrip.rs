//! Writers read back by the readers.

use std::path::{Path, PathBuf};

use hearth_core::{Access, Op, NEVER};
use hearth_trace::{accesses, fill_next_access, open, write_oracle_general, write_text, Format, Mode};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data").join(name)
}

fn block_accesses() -> Vec<Access> {
    let reader = open(&data("cloudPhysicsIO.vscsi"), None).unwrap();
    let mut acc: Vec<Access> = accesses(reader, Mode::Block { block_size: 4096 }).collect::<Result<_, _>>().unwrap();
    fill_next_access(&mut acc);
    acc
}

#[test]
fn oracle_general_round_trip_keeps_keys_sizes_and_next_access() {
    let original = block_accesses();
    assert!(original.iter().any(|a| a.next_access != NEVER));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blocks.oracleGeneral.bin");
    write_oracle_general(&path, &original).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), original.len() as u64 * 24);

    let reader = open(&path, None).unwrap();
    assert_eq!(reader.format(), Format::OracleGeneral);
    let reqs: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
    let back: Vec<Access> = accesses(reqs.iter().copied().map(Ok), Mode::Object).collect::<Result<_, _>>().unwrap();
    assert_eq!(back.len(), original.len());
    for (i, ((o, b), r)) in original.iter().zip(&back).zip(&reqs).enumerate() {
        assert_eq!((b.key, b.size, b.vtime), (o.key, o.size, o.vtime), "access {i}");
        // The file carries the next access; it must be the one we wrote.
        assert_eq!(r.next_access.unwrap_or(NEVER), o.next_access, "access {i}");
        assert_eq!(r.time_ns, o.vtime * 1_000_000_000, "logical clock, access {i}");
    }
}

#[test]
fn text_round_trip_keeps_keys() {
    let original: Vec<Access> = block_accesses().into_iter().take(5000).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blocks.txt");
    write_text(&path, original.iter()).unwrap();
    let back: Vec<Access> = accesses(open(&path, None).unwrap(), Mode::Object).collect::<Result<_, _>>().unwrap();
    let keys = |a: &[Access]| a.iter().map(|a| a.key).collect::<Vec<_>>();
    assert_eq!(keys(&back), keys(&original));
    assert!(back.iter().all(|a| a.size == 1 && a.op == Op::Read));
}

#[test]
fn writing_to_a_missing_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/x.txt");
    let err = write_text(&path, [Access::default()]).unwrap_err();
    assert!(err.to_string().contains("cannot create"), "{err}");
    assert!(err.to_string().contains("no/such/dir/x.txt"), "{err}");
}

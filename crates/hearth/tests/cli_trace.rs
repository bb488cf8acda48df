//! `hearth trace` end to end: every number is checked against a count made
//! here through `hearth_trace`, or by hand.

mod cli_support;
use cli_support::*;

use std::path::{Path, PathBuf};

use hearth_core::{Access, Op, NEVER};
use hearth_trace::{accesses, fill_next_access, open, sample, Mode};

/// Every access of a trace, with next accesses filled in memory.
fn filled(trace: &str, mode: Mode, keep: impl Fn(u64) -> bool) -> Vec<Access> {
    let mut all: Vec<Access> = accesses(open(Path::new(trace), None).unwrap(), mode)
        .map(Result::unwrap)
        .filter(|a| keep(a.key))
        .enumerate()
        .map(|(i, a)| Access { vtime: i as u64, ..a })
        .collect();
    fill_next_access(&mut all);
    all
}

/// Checks that `written` (oracleGeneral) holds exactly `want`: keys, sizes and next accesses.
fn assert_oracle_holds(written: &Path, want: &[Access]) {
    let got: Vec<_> = open(written, None).unwrap().map(Result::unwrap).collect();
    assert_eq!(got.len(), want.len());
    for (i, (r, a)) in got.iter().zip(want).enumerate() {
        let next = (a.next_access != NEVER).then_some(a.next_access);
        assert_eq!((r.offset, r.len, r.next_access), (a.key, a.size, next), "access {i}");
    }
}

#[test]
fn head_prints_the_first_requests_one_per_line() {
    let trace = shared("cloudPhysicsIO.vscsi");
    let out = stdout(&hearth(&["trace", "head", &trace, "-n", "5"]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert!(lines[0].contains("offset") && lines[0].contains("length"), "{out}");
    let first = open(Path::new(&trace), None).unwrap().take(5).map(Result::unwrap);
    for (i, (line, r)) in lines[1..].iter().zip(first).enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let op = if r.op == Op::Write { "write" } else { "read" };
        let time = format!("{}.{:06}", r.time_ns / 1_000_000_000, r.time_ns % 1_000_000_000 / 1000);
        let len = hearth_core::format_bytes(u64::from(r.len));
        assert_eq!(f[..5], [i.to_string(), time, "0".into(), op.into(), r.offset.to_string()], "{line}");
        assert_eq!(f[5..], [len.split(' ').collect::<Vec<_>>(), vec!["-"]].concat(), "{line}");
    }
    // `print` is the same command; ten lines by default.
    assert_eq!(stdout(&hearth(&["trace", "print", &trace])).lines().count(), 11);
    let oracle = stdout(&hearth(&["trace", "head", &shared("cloudPhysicsIO.oracleGeneral.bin"), "-n", "500"]));
    assert!(oracle.lines().next().unwrap().contains("object"));
    assert!(oracle.lines().skip(1).any(|l| !l.ends_with('-')), "some next access is recorded:\n{oracle}");
}

#[test]
fn stats_match_a_count_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("small.csv");
    // MSR CSV: filetime ticks of 100 ns, byte offsets and sizes; 4 KiB blocks.
    let t0 = 128_166_372_000_000_000u64;
    let rows = [
        format!("{t0},web,0,Read,0,4096,10"),                    // block 0
        format!("{},web,0,Write,4096,8192,10", t0 + 10_000_000), // blocks 1, 2
        format!("{},web,1,Read,2048,4096,10", t0 + 20_000_000),  // blocks 0, 1
        format!("{},web,0,Read,0,512,10", t0 + 30_000_000),      // block 0
    ];
    std::fs::write(
        &trace,
        format!("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n{}\n", rows.join("\n")),
    )
    .unwrap();
    let r: serde_json::Value =
        serde_json::from_str(&stdout(&hearth(&["trace", "stats", path(&trace), "--json", "-q"]))).unwrap();
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
    let want = [
        ("requests", 4),
        ("accesses", 6),
        ("unique_keys", 3),
        ("footprint_bytes", 3 * 4096),
        ("reads", 3),
        ("writes", 1),
        ("others", 0),
        ("bytes_read", 4096 + 4096 + 512),
        ("bytes_written", 8192),
        ("first_time_ns", t0 * 100),
        ("last_time_ns", t0 * 100 + 3_000_000_000),
        ("duration_ns", 3_000_000_000),
        ("min_request_bytes", 512),
        ("max_request_bytes", 8192),
        ("block_size", 4096),
    ];
    for (key, value) in want {
        assert_eq!(n(key), value, "{key}");
    }
    assert_eq!(r["mean_request_bytes"].as_f64(), Some(4224.0));
    assert_eq!(r["read_share"].as_f64(), Some(0.75));
    let text = stdout(&hearth(&["trace", "stats", path(&trace), "-q"]));
    assert!(text.contains("unique keys   3") && text.contains("spanning 3.000 s"), "{text}");
    assert!(text.contains("min 512 B, mean 4.1 KiB, max 8 KiB"), "{text}");
}

#[test]
fn stats_on_the_bundled_trace_agree_with_hearth_trace() {
    let trace = shared("cloudPhysicsIO.vscsi");
    let r: serde_json::Value =
        serde_json::from_str(&stdout(&hearth(&["trace", "stats", &trace, "--json", "-q"]))).unwrap();
    let all = filled(&trace, Mode::Block { block_size: 4096 }, |_| true);
    let keys: std::collections::HashSet<u64> = all.iter().map(|a| a.key).collect();
    let reqs: Vec<_> = open(Path::new(&trace), None).unwrap().map(Result::unwrap).collect();
    let reads = reqs.iter().filter(|q| q.op == Op::Read).count() as u64;
    assert_eq!(r["requests"], reqs.len() as u64);
    assert_eq!(r["accesses"], all.len() as u64);
    assert_eq!(r["unique_keys"], keys.len() as u64);
    assert_eq!(r["footprint_bytes"], keys.len() as u64 * 4096);
    assert_eq!(r["reads"], reads);
    assert_eq!(r["first_time_ns"], reqs[0].time_ns);
    assert_eq!(r["last_time_ns"], reqs.last().unwrap().time_ns);
    // A synthetic workload streams the same way.
    let synth = stdout(&hearth(&["trace", "stats", "synth:zipf:1000:0.9", "--requests", "5000", "--json", "-q"]));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&synth).unwrap()["requests"], 5000);
}

#[test]
fn convert_writes_oracle_general_with_the_in_memory_next_accesses() {
    let dir = tempfile::tempdir().unwrap();
    let trace = shared("cloudPhysicsIO.vscsi");
    let out = dir.path().join("cp.oracleGeneral.bin");
    let o = hearth(&["trace", "convert", &trace, "-o", path(&out), "-q"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("wrote 1141869 accesses"), "{o:?}");
    assert_oracle_holds(&out, &filled(&trace, Mode::Block { block_size: 4096 }, |_| true));

    // Object mode on libCacheSim's own oracleGeneral copy: the next accesses
    // written are the ones libCacheSim computed.
    let theirs = shared("cloudPhysicsIO.oracleGeneral.bin");
    let ours = dir.path().join("again.oracleGeneral.bin");
    stdout(&hearth(&["trace", "convert", &theirs, "-o", path(&ours), "-q"]));
    let read = |p: &str| open(Path::new(p), None).unwrap().map(|r| r.unwrap().next_access).collect::<Vec<_>>();
    assert_eq!(read(path(&ours)), read(&theirs));
    // Only the output is left: no temporary files.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

/// A converted trace's clock counts requests: `stats` gives it no time span
/// (1,141,869 requests read as seconds were "spanning 13d 05h"), nor a text
/// trace, which records no time; libCacheSim's own copy keeps its times.
#[test]
fn stats_give_a_time_span_only_to_traces_that_record_times() {
    let dir = tempfile::tempdir().unwrap();
    let converted = dir.path().join("cp.oracleGeneral.bin");
    stdout(&hearth(&["trace", "convert", &shared("cloudPhysicsIO.vscsi"), "-o", path(&converted), "-q"]));
    let text = dir.path().join("keys.txt");
    std::fs::write(&text, "1\n2\n1\n").unwrap();
    for (trace, says) in [(path(&converted), "the clock counts requests"), (path(&text), "not recorded")] {
        let out = stdout(&hearth(&["trace", "stats", trace, "-q"]));
        assert!(out.contains("time          not recorded") && out.contains(says) && !out.contains("spanning"), "{out}");
        let r: serde_json::Value =
            serde_json::from_str(&stdout(&hearth(&["trace", "stats", trace, "--json", "-q"]))).unwrap();
        assert_eq!((&r["timed"], &r["duration_ns"]), (&false.into(), &serde_json::Value::Null), "{r}");
    }
    let theirs = stdout(&hearth(&["trace", "stats", &shared("cloudPhysicsIO.oracleGeneral.bin"), "-q"]));
    assert!(theirs.contains("spanning"), "{theirs}");
}

#[test]
fn sample_keeps_whole_keys_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    let trace = shared("cloudPhysicsIO.vscsi");
    let out = |name: &str| dir.path().join(name);
    let run = |rate: &str, to: &PathBuf| stdout(&hearth(&["trace", "sample", &trace, "-o", path(to), "--rate", rate]));

    run("1.0", &out("all.bin"));
    stdout(&hearth(&["trace", "convert", &trace, "-o", path(&out("converted.bin")), "-q"]));
    assert_eq!(std::fs::read(out("all.bin")).unwrap(), std::fs::read(out("converted.bin")).unwrap());

    run("10%", &out("a.oracleGeneral.bin"));
    run("0.1", &out("b.oracleGeneral.bin"));
    let a = std::fs::read(out("a.oracleGeneral.bin")).unwrap();
    assert_eq!(a, std::fs::read(out("b.oracleGeneral.bin")).unwrap(), "same rate, same sample");
    let threshold = sample::threshold(0.1);
    let want = filled(&trace, Mode::Block { block_size: 4096 }, |k| sample::keeps(k, threshold));
    let total = 1_141_869.0;
    let share = want.len() as f64 / total;
    assert!((0.05..0.2).contains(&share), "kept {share} of the accesses");
    assert_oracle_holds(&out("a.oracleGeneral.bin"), &want);
}

#[test]
fn truncated_input_fails_naming_the_place_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(shared("cloudPhysicsIO.vscsi")).unwrap();
    let trace = dir.path().join("cut.vscsi");
    // 31250 whole 32-byte records, then 13 bytes of the next.
    std::fs::write(&trace, &bytes[..1_000_013]).unwrap();
    let err = failure(&hearth(&["trace", "stats", path(&trace), "-q"]));
    assert!(err.contains("cut.vscsi: byte 1000000: truncated record"), "{err}");
    let out = dir.path().join("out.oracleGeneral.bin");
    let err = failure(&hearth(&["trace", "convert", path(&trace), "-o", path(&out), "-q"]));
    assert!(err.contains("cut.vscsi: byte 1000000: truncated record"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec!["cut.vscsi"], "no output, no temporary files");
}

#[test]
fn bad_rates_and_compressed_outputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = shared("cloudPhysicsIO.vscsi");
    let out = dir.path().join("s.bin");
    for rate in ["0", "1.5", "150%", "junk"] {
        let err = failure(&hearth(&["trace", "sample", &trace, "-o", path(&out), "--rate", rate]));
        assert!(err.lines().next().unwrap().contains(&format!("{rate:?}")), "{rate}: {err}");
    }
    let zst = dir.path().join("s.oracleGeneral.zst");
    let err = failure(&hearth(&["trace", "convert", &trace, "-o", path(&zst)]));
    assert!(err.contains("cannot write .zst output"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

//! The harness's counts: at least 10,000 crash states and 1,000 injected
//! faults, no violation.

use std::time::Instant;

use super::*;

const SEEDS: [u64; 3] = [1, 2, 3];
const REQUESTS: usize = 120;

#[test]
fn every_bounded_crash_state_of_both_write_modes_keeps_every_flushed_write() {
    let started = Instant::now();
    let mut states = 0;
    let mut problems = Vec::new();
    for mode in [DeviceWriteMode::Back, DeviceWriteMode::Through] {
        let formatted = Run::formatted(mode);
        for seed in SEEDS {
            let run = run(mode, seed, REQUESTS, None);
            assert!(run.violations.is_empty(), "{mode:?} seed {seed}: {:?}", run.violations);
            let (n, p) = run.check_crash_states(mode, &formatted);
            states += n;
            problems.extend(p.into_iter().map(|p| format!("{mode:?} seed {seed}: {p}")));
        }
    }
    println!("crash states checked: {states}, violations: {}, in {:.1?}", problems.len(), started.elapsed());
    assert!(problems.is_empty(), "{} violations, first: {:#?}", problems.len(), &problems[..problems.len().min(10)]);
    assert!(states >= 10_000, "only {states} crash states");
}

#[test]
fn every_single_injected_write_sync_or_flush_failure_keeps_every_flushed_write() {
    let started = Instant::now();
    let mut faults = 0;
    let mut failed_requests = 0;
    let mut problems = Vec::new();
    for mode in [DeviceWriteMode::Back, DeviceWriteMode::Through] {
        let formatted = Run::formatted(mode);
        let tried = run(mode, SEEDS[0], REQUESTS, None).tried();
        for at in 0..tried {
            for errno in [libc::EIO, libc::ENOSPC] {
                let run = run(mode, SEEDS[0], REQUESTS, Some(Fault { at, errno }));
                assert_eq!(run.faults_hit(), 1, "{mode:?}: fault {at} was never reached");
                faults += 1;
                failed_requests += run.failed_requests;
                let tag = |p: String| format!("{mode:?} fault at {at} errno {errno}: {p}");
                problems.extend(run.violations.iter().cloned().map(tag));
                problems.extend(run.check_end(mode, &formatted).into_iter().map(tag));
            }
        }
    }
    println!(
        "faults injected: {faults}, requests that failed: {failed_requests}, violations: {}, in {:.1?}",
        problems.len(),
        started.elapsed()
    );
    assert!(problems.is_empty(), "{} violations, first: {:#?}", problems.len(), &problems[..problems.len().min(10)]);
    assert!(faults >= 1_000, "only {faults} faults");
}

//! Statistics and determinism of the synthetic generators.

use std::collections::{HashMap, HashSet};

use hearth_core::Op;
use hearth_trace::synth::{Part, Pattern, Synth};
use hearth_trace::Request;

fn blocks(pattern: Pattern, seed: u64, n: usize) -> Vec<u64> {
    Synth::new(pattern, seed).unwrap().take(n).map(|r| r.offset / 4096).collect()
}

fn counts(blocks: &[u64]) -> HashMap<u64, usize> {
    let mut c = HashMap::new();
    for &b in blocks {
        *c.entry(b).or_insert(0) += 1;
    }
    c
}

#[test]
fn zipf_head_frequency_matches_theory() {
    let (n, samples) = (1000u64, 200_000);
    for alpha in [0.8, 1.0, 1.2] {
        let got = blocks(Pattern::Zipf { blocks: n, alpha }, 7, samples);
        let harmonic: f64 = (1..=n).map(|r| (r as f64).powf(-alpha)).sum();
        let c = counts(&got);
        for rank in [1u64, 2, 10] {
            let expected = (rank as f64).powf(-alpha) / harmonic;
            let observed = c.get(&(rank - 1)).copied().unwrap_or(0) as f64 / samples as f64;
            // Binomial standard deviation is below 0.1% here; allow 5 sigma-ish.
            assert!((observed - expected).abs() < 0.005, "alpha {alpha} rank {rank}: {observed} vs {expected}");
        }
        assert!(got.iter().all(|&b| b < n));
    }
}

#[test]
fn uniform_covers_the_range_evenly() {
    let got = blocks(Pattern::Uniform { blocks: 100 }, 3, 100_000);
    let c = counts(&got);
    assert_eq!(c.len(), 100);
    // Each count is Binomial(100000, 0.01): mean 1000, sd ~31.
    assert!(c.values().all(|&k| (850..1150).contains(&k)), "{c:?}");
}

#[test]
fn scans_never_repeat_and_loops_cycle() {
    assert_eq!(blocks(Pattern::Scan { start: 50 }, 1, 5), vec![50, 51, 52, 53, 54]);
    assert_eq!(blocks(Pattern::Loop { blocks: 3 }, 1, 7), vec![0, 1, 2, 0, 1, 2, 0]);
}

#[test]
fn mix_follows_the_weights_and_tags_parts_as_clients() {
    let pattern = Pattern::Mix(vec![
        Part { weight: 3.0, first_block: 0, pattern: Pattern::Zipf { blocks: 100, alpha: 1.0 } },
        Part { weight: 1.0, first_block: 1_000_000, pattern: Pattern::Scan { start: 0 } },
    ]);
    let reqs: Vec<Request> = Synth::new(pattern, 11).unwrap().take(40_000).collect();
    let scans: Vec<u64> = reqs.iter().filter(|r| r.client == 1).map(|r| r.offset / 4096).collect();
    let share = scans.len() as f64 / reqs.len() as f64;
    assert!((share - 0.25).abs() < 0.015, "scan share {share}");
    // The scan part is sequential in its own range; the zipf part stays below it.
    assert!(scans.windows(2).all(|w| w[1] == w[0] + 1) && scans[0] == 1_000_000);
    assert!(reqs.iter().filter(|r| r.client == 0).all(|r| r.offset / 4096 < 100));
}

#[test]
fn same_seed_same_stream_other_seed_other_stream() {
    let make = |seed| Synth::new(Pattern::Zipf { blocks: 10_000, alpha: 0.9 }, seed).unwrap().write_fraction(0.3);
    let a: Vec<Request> = make(5).take(1000).collect();
    let b: Vec<Request> = make(5).take(1000).collect();
    let c: Vec<Request> = make(6).take(1000).collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    let writes = a.iter().filter(|r| r.op == Op::Write).count();
    assert!((230..370).contains(&writes), "{writes} writes of 1000");
    let distinct: HashSet<u64> = a.iter().map(|r| r.offset).collect();
    assert!(distinct.len() > 100);
}

#[test]
fn requests_are_whole_blocks_at_a_steady_rate() {
    let reqs: Vec<Request> =
        Synth::new(Pattern::Loop { blocks: 4 }, 0).unwrap().block_size(512).interarrival_ns(250).take(4).collect();
    let got: Vec<(u64, u64, u32)> = reqs.iter().map(|r| (r.time_ns, r.offset, r.len)).collect();
    assert_eq!(got, vec![(0, 0, 512), (250, 512, 512), (500, 1024, 512), (750, 1536, 512)]);
}

#[test]
fn bad_parameters_are_refused() {
    assert!(Synth::new(Pattern::Uniform { blocks: 0 }, 0).is_err());
    assert!(Synth::new(Pattern::Zipf { blocks: 10, alpha: -1.0 }, 0).is_err());
    assert!(Synth::new(Pattern::Mix(vec![]), 0).is_err());
    let zero_weight = Part { weight: 0.0, first_block: 0, pattern: Pattern::Loop { blocks: 1 } };
    assert!(Synth::new(Pattern::Mix(vec![zero_weight]), 0).is_err());
}

#[test]
fn patterns_parse_from_their_command_line_spelling() {
    for text in ["zipf:1000:0.9", "uniform:10", "scan:5", "loop:7"] {
        assert_eq!(text.parse::<Pattern>().unwrap().to_string(), text);
    }
    assert_eq!("scan".parse::<Pattern>().unwrap(), Pattern::Scan { start: 0 });
    assert!("zipf:1000".parse::<Pattern>().unwrap_err().to_string().contains("expected zipf:<blocks>:<alpha>"));
    assert!("loop:x".parse::<Pattern>().unwrap_err().to_string().contains("bad block count"));
}

/// The usage names every workload `synth:` takes, oltp included.
#[test]
fn an_unknown_workload_lists_them_all() {
    let err = "bonfire".parse::<Pattern>().unwrap_err().to_string();
    for name in ["zipf:", "uniform:", "scan", "loop:", "oltp"] {
        assert!(err.contains(name), "{err}");
    }
}

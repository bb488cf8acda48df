//! QuickMine's tests: the paper's worked example, throttling, and each variant.
use super::*;
use hearth_core::Op;
use proptest::prelude::*;

fn config(g: usize) -> Config {
    Config { max_prefixes: 1000, grace: 0, ..Config::paper(g) }
}

fn demand(ctx: u32, block: Key) -> Demand {
    Demand { block, ctx, time_ns: 0, op: Op::Read, class: Class::Miss }
}

fn run_contexts(q: &mut QuickMine, contexts: &[(u32, &[Key])], interleave: bool) {
    for &(ctx, _) in contexts {
        q.begin(ctx, 0);
    }
    let mut out = Vec::new();
    if interleave {
        let longest = contexts.iter().map(|c| c.1.len()).max().unwrap_or(0);
        for i in 0..longest {
            for &(ctx, seq) in contexts {
                if let Some(&b) = seq.get(i) {
                    q.access(&demand(ctx, b), &|_| false, &mut out);
                }
            }
        }
    } else {
        for &(ctx, seq) in contexts {
            for &b in seq {
                q.access(&demand(ctx, b), &|_| false, &mut out);
            }
        }
    }
    for &(ctx, _) in contexts {
        q.end(ctx);
    }
}

fn rules_of(q: &QuickMine) -> Vec<(Key, Key, Vec<Key>)> {
    q.rule_cache()
        .snapshot()
        .into_iter()
        .map(|(k, s)| {
            let mut c: Vec<Key> = s.iter().map(|s| s.block).collect();
            c.sort();
            (k.of[0], k.of[1], c)
        })
        .collect()
}

/// The paper's example: T1 = 6,7,8 and T2 = 2,3,4,5,6,7 with G = 5,
/// issued interleaved. Per context, T1 gives 6&7 -> 8 and T2 gives each
/// consecutive pair the rest of T2 as suffixes.
#[test]
fn worked_example_rules_exactly() {
    let t1: &[Key] = &[6, 7, 8];
    let t2: &[Key] = &[2, 3, 4, 5, 6, 7];
    let mut q = QuickMine::new(config(5)).unwrap();
    run_contexts(&mut q, &[(1, t1), (2, t2)], true);
    let expected: Vec<(Key, Key, Vec<Key>)> =
        vec![(2, 3, vec![4, 5, 6, 7]), (3, 4, vec![5, 6, 7]), (4, 5, vec![6, 7]), (5, 6, vec![7]), (6, 7, vec![8])];
    assert_eq!(rules_of(&q), expected);
    assert_eq!(q.rule_count(), 11);
    // Every support is 1: each rule was seen once.
    assert!(q.rule_cache().snapshot().iter().all(|(_, s)| s.iter().all(|s| s.count == 1)));

    // Context-oblivious mining of the same interleaved stream
    // 6 2 7 3 8 4 5 6 7 finds rules that hold in neither context (the
    // stream never ends, so only the complete windows are mined).
    let mut oblivious = QuickMine::new(Config { context_aware: false, ..config(5) }).unwrap();
    run_contexts(&mut oblivious, &[(1, t1), (2, t2)], true);
    let expected: Vec<(Key, Key, Vec<Key>)> =
        vec![(2, 7, vec![3, 4, 5, 6, 8]), (6, 2, vec![3, 4, 5, 7, 8]), (7, 3, vec![4, 5, 6, 8])];
    assert_eq!(rules_of(&oblivious), expected);
}

#[test]
fn a_smaller_lookahead_limits_the_suffixes() {
    let mut q = QuickMine::new(config(2)).unwrap();
    run_contexts(&mut q, &[(1, &[2, 3, 4, 5, 6, 7])], false);
    assert_eq!(rules_of(&q), vec![(2, 3, vec![4, 5]), (3, 4, vec![5, 6]), (4, 5, vec![6, 7]), (5, 6, vec![7])]);
}

#[test]
fn misses_prefetch_the_most_supported_suffixes_not_cached() {
    let mut q = QuickMine::new(Config { degree: 2, ..config(3) }).unwrap();
    // 1 2 -> 3 three times, 1 2 -> 9 once, 1 2 -> 4 twice.
    for (i, tail) in [[3, 4], [3, 4], [3, 5], [9, 6]].iter().enumerate() {
        run_contexts(&mut q, &[(i as u32, &[1, 2, tail[0], tail[1]])], false);
    }
    let mut out = Vec::new();
    q.begin(50, 0);
    q.access(&demand(50, 1), &|_| false, &mut out);
    assert!(out.is_empty(), "one block is no prefix");
    q.access(&demand(50, 2), &|b| b == 3, &mut out);
    assert_eq!(out, vec![4, 5], "3 is cached; 4 (2) beats 5 and 6 (1), ties by block");
}

#[test]
fn throttling_stops_a_class_whose_prefetches_are_wasted() {
    let mut q = QuickMine::new(config(2)).unwrap();
    // Class 0 always runs 1 2 3; its prefetches of 3 are never used.
    let mut issued = 0;
    for round in 0..400u32 {
        q.begin(round, 0);
        let mut out = Vec::new();
        for b in [1, 2, 3] {
            q.access(&demand(round, b), &|_| false, &mut out);
        }
        for &b in &out {
            q.outcome(b, false);
        }
        issued += out.len();
        q.end(round);
    }
    // The first WINDOW prefetches go out at full degree; afterwards only
    // one context in PROBE_EVERY still prefetches.
    let expected_max = WINDOW as usize + 400 / PROBE_EVERY as usize + 1;
    assert!(issued >= WINDOW as usize && issued <= expected_max, "issued {issued}");
    let mut unthrottled = QuickMine::new(Config { throttle: false, ..config(2) }).unwrap();
    let mut count = 0;
    for round in 0..400u32 {
        unthrottled.begin(round, 0);
        let mut out = Vec::new();
        for b in [1, 2, 3] {
            unthrottled.access(&demand(round, b), &|_| false, &mut out);
        }
        count += out.len();
        unthrottled.end(round);
    }
    assert_eq!(count, 399, "every context but the first prefetches 3");
}

/// Class 1 prefetches 3..=7 after 1 2, and a quarter of them get used:
/// by class-2 contexts (promotes) if `by_class_two`, else by class 1
/// itself. Class 2's own prefetches (22..=26 after 20 21) are always
/// used. Returns class 1's prefetches in the last 100 of 400 rounds.
fn class_one_prefetches(by_class_two: bool) -> usize {
    let mut q = QuickMine::new(config(5)).unwrap();
    let mut late = 0;
    for round in 0..400u32 {
        let (one, two) = (2 * round, 2 * round + 1);
        q.begin(one, 1);
        q.begin(two, 2);
        let mut out = Vec::new();
        let learn = round == 0;
        let seq_one: &[Key] = if learn { &[1, 2, 3, 4, 5, 6, 7] } else { &[1, 2] };
        for &b in seq_one {
            q.access(&demand(one, b), &|_| false, &mut out);
        }
        if round >= 300 {
            late += out.len();
        }
        for (i, &b) in out.iter().enumerate() {
            let used = (round as usize + i).is_multiple_of(4);
            if used && by_class_two {
                let promote = Demand { class: Class::Promote, ..demand(two, b) };
                q.access(&promote, &|_| false, &mut Vec::new());
            }
            q.outcome(b, used);
        }
        let mut own = Vec::new();
        let seq_two: &[Key] = if learn { &[20, 21, 22, 23, 24, 25, 26] } else { &[20, 21] };
        for &b in seq_two {
            q.access(&demand(two, b), &|_| false, &mut own);
        }
        for &b in &own {
            q.outcome(b, true);
        }
        q.end(one);
        q.end(two);
    }
    assert_eq!(q.symbiotic_set(1).len(), if by_class_two { 2 } else { 1 });
    late
}

#[test]
fn symbiotic_classes_are_throttled_as_a_set() {
    // A quarter of class 1's prefetches are used: alone it is halved
    // to 3 prefetches per context.
    assert_eq!(class_one_prefetches(false), 300);
    // When its prefetches serve class 2, the two form a set that pays
    // off as a whole (25% and 100%), and class 1 prefetches at full
    // degree, 5 per context.
    assert_eq!(class_one_prefetches(true), 500);
}

/// Runs `seqs` as contexts of template 0, one after another, and
/// returns what a new context prefetches at each read of `probe`.
fn prefetched_along(cfg: Config, seqs: &[&[Key]], probe: &[Key]) -> Vec<Vec<Key>> {
    let mut q = QuickMine::new(cfg).unwrap();
    let learned: Vec<(u32, &[Key])> = seqs.iter().enumerate().map(|(i, s)| (i as u32, *s)).collect();
    run_contexts(&mut q, &learned, false);
    let ctx = seqs.len() as u32;
    q.begin(ctx, 0);
    probe
        .iter()
        .map(|&b| {
            let mut out = Vec::new();
            q.access(&demand(ctx, b), &|_| false, &mut out);
            out
        })
        .collect()
}

fn variable_order(g: usize) -> Config {
    Config { min_order: 1, max_order: 3, ..config(g) }
}

/// 2 3 is followed by 4 three times (after 1) and by 5 once (after 9):
/// the order-3 prefix 9 2 3 tells them apart, and a prefix never seen
/// at length 2 (8 6) falls back to what 6 alone predicted.
#[test]
fn variable_order_prefers_long_prefixes_and_falls_back_to_short_ones() {
    let seqs: &[&[Key]] = &[&[1, 2, 3, 4], &[1, 2, 3, 4], &[1, 2, 3, 4], &[9, 2, 3, 5], &[6, 7]];
    let one = |cfg: Config| Config { degree: 1, ..cfg };
    let paper = prefetched_along(one(config(1)), seqs, &[9, 2, 3]);
    assert_eq!(paper[2], vec![4], "2 3 -> 4 is the best supported pair rule");
    let vo = prefetched_along(one(variable_order(1)), seqs, &[9, 2, 3]);
    assert_eq!(vo[2], vec![5], "9 2 3 -> 5");
    assert!(prefetched_along(config(1), seqs, &[8, 6])[1].is_empty(), "8 6 was never seen");
    assert_eq!(prefetched_along(variable_order(1), seqs, &[8, 6])[1], vec![7], "6 -> 7");
}

/// Contexts of a template read a fresh key (100+), then 50, another
/// fresh key, then 60: block rules never see a fresh key twice, rules
/// keyed by position know what the next positions read.
#[test]
fn position_rules_predict_around_keys_never_seen() {
    let seqs: Vec<Vec<Key>> = (0..4).map(|i| vec![100 + i, 50, 200 + i, 60]).collect();
    let seqs: Vec<&[Key]> = seqs.iter().map(|s| s.as_slice()).collect();
    let probe = [999, 50, 998, 60];
    let paper = prefetched_along(config(3), &seqs, &probe);
    assert!(paper.iter().all(|o| o.is_empty()), "no block rule applies: {paper:?}");
    let by_position = prefetched_along(Config { by_position: true, ..config(3) }, &seqs, &probe);
    // 50 and 60 follow position 0 every time, each fresh key once.
    assert_eq!(by_position[0][..2], [50, 60]);
    assert_eq!(by_position[2], vec![60], "position 2 is followed by 60");
}

/// With a window of one block, a lookup predicts only the next read;
/// looking ahead along the guessed reads fetches the one after too.
#[test]
fn lookahead_chains_past_the_mining_window() {
    let seqs: &[&[Key]] = &[&[1, 2, 3, 4, 5, 6], &[1, 2, 3, 4, 5, 6]];
    let near = prefetched_along(config(1), seqs, &[1, 2]);
    assert_eq!(near[1], vec![3]);
    let far = prefetched_along(Config { ahead: 3, ..config(1) }, seqs, &[1, 2]);
    assert_eq!(far[1], vec![3, 4, 5]);
}

/// A hit triggers no lookup in the paper's QuickMine; with hit lookups it
/// does, and asks for what is not cached.
#[test]
fn lookups_on_hits_prefetch_after_a_hit() {
    let seqs: &[&[Key]] = &[&[1, 2, 3], &[1, 2, 3]];
    let after_hit = |cfg: Config| {
        let mut q = QuickMine::new(cfg).unwrap();
        let learned: Vec<(u32, &[Key])> = seqs.iter().enumerate().map(|(i, s)| (i as u32, *s)).collect();
        run_contexts(&mut q, &learned, false);
        q.begin(9, 0);
        let mut out = Vec::new();
        q.access(&demand(9, 1), &|_| false, &mut out);
        q.access(&Demand { class: Class::Hit, ..demand(9, 2) }, &|_| false, &mut out);
        out
    };
    assert!(after_hit(config(3)).is_empty());
    assert_eq!(after_hit(Config { hit_lookups: HitLookups::Shared, ..config(3) }), vec![3]);
}

/// A template whose prefetches are all used, but demanded `gap_ns` after
/// their issue: how many it issues over 400 contexts with `late_ns`.
fn issued_when_demanded_after(gap_ns: u64, late_ns: u64) -> usize {
    let mut q = QuickMine::new(Config { late_ns, ..config(2) }).unwrap();
    let mut issued = 0;
    for round in 0..400u32 {
        q.begin(round, 0);
        let mut out = Vec::new();
        let t = u64::from(round) * 1_000_000_000;
        q.access(&Demand { time_ns: t, ..demand(round, 1) }, &|_| false, &mut out);
        q.access(&Demand { time_ns: t + 1_000, ..demand(round, 2) }, &|_| false, &mut out);
        issued += out.len();
        let class = if out.contains(&3) { Class::Promote } else { Class::Miss };
        q.access(&Demand { time_ns: t + 1_000 + gap_ns, class, ..demand(round, 3) }, &|_| false, &mut Vec::new());
        for &b in &out {
            q.outcome(b, true);
        }
        q.end(round);
    }
    issued
}

#[test]
fn timeliness_throttles_prefetches_that_arrive_after_their_demand() {
    // Without the timeliness check, or with demands well after the
    // prefetch, every context but the first prefetches 3.
    assert_eq!(issued_when_demanded_after(10_000, 0), 399);
    assert_eq!(issued_when_demanded_after(1_000_000, 100_000), 399);
    // Demanded 10 µs after issue, with a 100 µs device: all late, so
    // wasted, and the template is throttled as in the accuracy test.
    let late = issued_when_demanded_after(10_000, 100_000);
    assert!(late <= WINDOW as usize + 400 / PROBE_EVERY as usize + 1, "issued {late}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn prefix_and_suffix_bounds_hold(
        max_prefixes in 1usize..20,
        max_suffixes in 1usize..6,
        grace in 0u32..5,
        g in 1usize..6,
        events in proptest::collection::vec((0u32..6, 0u64..30, 0u8..10), 0..400),
    ) {
        let cfg = Config { max_prefixes, max_suffixes, grace, degree: 3, ..Config::paper(g) };
        let mut q = QuickMine::new(cfg).unwrap();
        let mut out = Vec::new();
        for (ctx, block, action) in events {
            match action {
                0 => q.begin(ctx, ctx % 3),
                1 => q.end(ctx),
                2 => q.outcome(block, block % 2 == 0),
                _ => q.access(&demand(ctx, block), &|b| b % 5 == 0, &mut out),
            }
            let snap = q.rule_cache().snapshot();
            prop_assert!(snap.len() <= max_prefixes);
            prop_assert_eq!(snap.len(), q.rule_cache().prefixes());
            let mut total = 0;
            for (_, s) in &snap {
                prop_assert!(!s.is_empty() && s.len() <= max_suffixes);
                let mut blocks: Vec<Key> = s.iter().map(|s| s.block).collect();
                blocks.sort();
                blocks.dedup();
                prop_assert_eq!(blocks.len(), s.len(), "no duplicate suffix");
                total += s.len();
            }
            prop_assert_eq!(total, q.rule_count());
        }
        prop_assert!(out.iter().all(|b| b % 5 != 0), "never prefetches a cached block");
    }
}

/// With `fallback`, one-block rules are asked only where the two-block
/// rule has no candidate, and only for suffixes seen at least twice:
/// 1 2 is followed by 3, so a context reading 1 2 gets 3 alone, while a
/// context reading 6 2 (never seen) falls back to what followed 2: 3 and 4
/// (twice each), not 5 (once).
#[test]
fn fallback_rules_fill_in_only_where_the_longest_prefix_has_none() {
    let seqs: &[&[Key]] = &[&[1, 2, 3], &[1, 2, 3], &[9, 2, 4], &[9, 2, 4], &[8, 2, 5]];
    let fallback = Config { min_order: 1, max_order: 2, by_position: true, fallback: true, ..config(1) };
    assert_eq!(prefetched_along(fallback.clone(), seqs, &[1, 2])[1], vec![3]);
    assert_eq!(prefetched_along(fallback, seqs, &[6, 2])[1], vec![3, 4]);
    // Without the fallback rule, shorter prefixes fill the degree at once.
    let orders = Config { min_order: 1, max_order: 2, ..config(1) };
    assert_eq!(prefetched_along(orders.clone(), seqs, &[1, 2])[1], vec![3, 4, 5]);
    assert_eq!(prefetched_along(orders, seqs, &[6, 2])[1], vec![3, 4, 5]);
}

/// 400 contexts of one template, with a prefetch partition of 8 blocks
/// (the oldest pushed out by each arrival): misses on 1, 2 ask for
/// 30..=37 (filling it); hits on 7, 8 (main cache) ask for 9..=12, of
/// which only 9 is ever used (a hit throttle at half degree), pushing out
/// 30..=33. Then 9 and, if `read_pushed`, 30..=37 are
/// read: the pushed-out ones miss. Returns the blocks hit lookups asked
/// for and the misses on pushed-out blocks.
fn hit_lookups_pushing_out(gated: bool, read_pushed: bool) -> (usize, usize) {
    let (by_hits, pushed_missed, _) = hit_lookups_with_gate(gated, read_pushed);
    (by_hits, pushed_missed)
}

/// [`hit_lookups_pushing_out`], and what the gate reported.
fn hit_lookups_with_gate(gated: bool, read_pushed: bool) -> (usize, usize, Option<GateStats>) {
    let cfg = Config { hit_lookups: HitLookups::Throttled { gated }, degree: 8, max_suffixes: 16, ..config(1) };
    let mut q = QuickMine::new(cfg).unwrap();
    let learned: Vec<Vec<Key>> = (30..=37).map(|b| vec![1, 2, b]).chain((9..=12).map(|b| vec![7, 8, b])).collect();
    let learned: Vec<(u32, &[Key])> = learned.iter().enumerate().map(|(i, s)| (i as u32, s.as_slice())).collect();
    run_contexts(&mut q, &learned, false);
    let (mut by_hits, mut pushed_missed) = (0, 0);
    for round in 100..500u32 {
        q.begin(round, 0);
        let mut partition: VecDeque<Key> = VecDeque::new();
        let read = |q: &mut QuickMine, block: Key, class: Class, partition: &mut VecDeque<Key>| {
            let mut out = Vec::new();
            let cached = |b: Key| b == 7 || b == 8 || partition.contains(&b);
            q.access(&Demand { class, ..demand(round, block) }, &cached, &mut out);
            for &b in &out {
                partition.push_back(b);
                if partition.len() > 8 {
                    let pushed = partition.pop_front().expect("over capacity");
                    q.outcome(pushed, false);
                }
            }
            out.len()
        };
        read(&mut q, 1, Class::Miss, &mut partition);
        read(&mut q, 2, Class::Miss, &mut partition);
        read(&mut q, 7, Class::Hit, &mut partition);
        by_hits += read(&mut q, 8, Class::Hit, &mut partition);
        let later: Vec<Key> = if read_pushed { [9].into_iter().chain(30..=37).collect() } else { vec![9] };
        for b in later {
            // Reads after the hits ask for nothing (all cached to the
            // lookups): only whether each is a promote or a miss matters.
            let waiting = partition.iter().position(|&w| w == b).map(|i| partition.remove(i));
            let class = if waiting.is_some() { Class::Promote } else { Class::Miss };
            q.access(&Demand { class, ..demand(round, b) }, &|_| true, &mut Vec::new());
            if waiting.is_some() {
                q.outcome(b, true);
            } else if b != 9 {
                pushed_missed += 1;
            }
        }
        for b in partition.drain(..) {
            q.outcome(b, false);
        }
        q.end(round);
    }
    (by_hits, pushed_missed, q.gate_stats())
}

#[test]
fn the_gate_stops_hit_lookups_whose_push_outs_cost_more_than_they_save() {
    // Ungated, the hit lookups (1 in 4 used) go on at half degree in every
    // context, each pushing out 4 blocks that are then missed.
    assert_eq!(hit_lookups_pushing_out(false, true), (1600, 1600));
    // Gated, 1 miss saved against 4 caused per context: the gate closes
    // after its first window, and only one hit lookup in 16 issues.
    let (by_hits, pushed_missed) = hit_lookups_pushing_out(true, true);
    assert!(by_hits < 400 && pushed_missed < 400, "gated: {by_hits} hit prefetches, {pushed_missed} misses");
    // A push-out nobody misses costs nothing: the gate stays open.
    assert_eq!(hit_lookups_pushing_out(true, false).0, 1600);
}

#[test]
fn the_gate_counts_its_lookups_and_windows() {
    assert_eq!(hit_lookups_with_gate(false, true).2, None, "ungated: no gate to report");
    // Two hits a context look up (7 and 8), 400 contexts: 800 triggers.
    let (_, _, closing) = hit_lookups_with_gate(true, true);
    let g = closing.expect("gated");
    assert_eq!(g.open_lookups + g.probe_lookups + g.blocked_lookups, 800, "{g:?}");
    // Closed after its first window and never open again: 1 saved to 4 cost.
    assert!(g.closed_windows > 0 && g.cost > g.saved, "{g:?}");
    assert_eq!(g.open_windows + g.closed_windows, (g.saved + g.cost) / u64::from(WINDOW), "{g:?}");
    assert_eq!(g.probe_lookups, (g.probe_lookups + g.blocked_lookups) / u64::from(PROBE_EVERY), "{g:?}");
    // Nothing missed after a push-out: open throughout, every trigger issues.
    let g = hit_lookups_with_gate(true, false).2.expect("gated");
    assert_eq!((g.open_lookups, g.probe_lookups, g.blocked_lookups, g.cost, g.closed_windows), (800, 0, 0, 0, 0));
    assert!(g.saved > 0 && g.open_windows == g.saved / u64::from(WINDOW), "{g:?}");
}

/// Class 0's lookups at 1 2 rank 3 first (it followed 1 2 most often),
/// then 15 blocks that followed once; 3 is always read, the others never.
/// Returns the prefetches of 3, and of the others, in the last 100 of 400
/// rounds.
fn first_candidate_prefetches(top_apart: bool) -> (usize, usize) {
    let mut q = QuickMine::new(Config { degree: 16, max_suffixes: 32, top_apart, ..config(2) }).unwrap();
    for (i, x) in [3, 3, 3].into_iter().chain(4..=18).enumerate() {
        run_contexts(&mut q, &[(i as u32, &[1, 2, x])], false);
    }
    let (mut threes, mut others) = (0, 0);
    for round in 0..400u32 {
        let ctx = 1000 + round;
        q.begin(ctx, 0);
        let mut out = Vec::new();
        for b in [1, 2, 3] {
            q.access(&demand(ctx, b), &|_| false, &mut out);
        }
        for &b in &out {
            q.outcome(b, b == 3);
        }
        if round >= 300 {
            threes += out.iter().filter(|&&b| b == 3).count();
            others += out.iter().filter(|&&b| b != 3).count();
        }
        q.end(ctx);
    }
    (threes, others)
}

#[test]
fn the_first_candidate_throttled_apart_keeps_being_asked_for() {
    // One throttle sees 1 used in 16 (or in 8 at half degree): off, and 3
    // goes out only in the one context in 16 that probes.
    let (threes, others) = first_candidate_prefetches(false);
    assert!(threes <= 100 / PROBE_EVERY as usize + 1, "one throttle: {threes} prefetches of 3");
    // Apart, the first block's throttle sees every one used; the rest's
    // turns the others off.
    let (threes_apart, others_apart) = first_candidate_prefetches(true);
    assert_eq!(threes_apart, 100, "apart: 3 in every context");
    assert!(others_apart <= others.max(8 * (100 / PROBE_EVERY as usize + 1)), "apart: {others_apart} others");
}

/// Runs `seqs` as (template, blocks) contexts one after another, then a
/// context of template 0 reading `probe`; returns what its last read asked for.
fn pooled_prefetch(pooled: bool, seqs: &[(u32, &[Key])], probe: &[Key]) -> Vec<Key> {
    let cfg = Config { min_order: 1, max_order: 2, by_position: true, fallback: true, pooled, ..config(1) };
    let mut q = QuickMine::new(cfg).unwrap();
    let mut out = Vec::new();
    for (ctx, &(class, seq)) in seqs.iter().enumerate() {
        q.begin(ctx as u32, class);
        for &b in seq {
            q.access(&demand(ctx as u32, b), &|_| false, &mut out);
        }
        q.end(ctx as u32);
    }
    let ctx = seqs.len() as u32;
    q.begin(ctx, 0);
    for &b in probe {
        out.clear();
        q.access(&demand(ctx, b), &|_| false, &mut out);
    }
    out
}

/// Templates 0 and 1 each read 1 then 2 once: neither template's own
/// one-block rule 1 -> 2 reaches the fallback support, their pooled count
/// does, so a context of template 0 reading a new block then 1 gets 2.
#[test]
fn pooled_one_block_rules_reach_the_support_over_templates() {
    let twice: &[(u32, &[Key])] = &[(0, &[1, 2]), (1, &[1, 2])];
    assert!(pooled_prefetch(false, twice, &[7, 1]).is_empty(), "each template saw 1 -> 2 once");
    assert_eq!(pooled_prefetch(true, twice, &[7, 1]), vec![2]);
    // Pooled, a pair still needs the support: 1 -> 2 and 1 -> 3 once each.
    let apart: &[(u32, &[Key])] = &[(0, &[1, 2]), (1, &[1, 3])];
    assert!(pooled_prefetch(true, apart, &[7, 1]).is_empty());
}

/// Who reads the blocks the hit prefetches push out of the partition.
#[derive(Clone, Copy, PartialEq)]
enum PushedReader {
    Nobody,
    /// The context that asked for them, before it ends.
    Asker,
    /// Another transaction, after the asking one ended (the first pushed
    /// out, 30, alone: a first read predicts nothing).
    Later,
}

/// 1,200 contexts of one template, reads 200 µs apart, a prefetch partition
/// of `room` blocks: misses on 1, 2 ask for 30..=37; hits on 7, 8 (main
/// cache) ask for 9..=16, of which only 9 is read, in one context in
/// `nine_every`; 10..=16 never (the rest throttle goes off). `pushed` says
/// who reads 30..=37 (those pushed out miss). Ungated (the shared gate out
/// of the way), the lift on or not. With `claimer`, another template's
/// transaction reads 40, 41 between 8 and 9, its rule 40&41 -> 9..=12 (a
/// miss lookup, unlifted) finding the hit lookup's blocks waiting. Returns
/// the blocks hit lookups asked for in the last 300 contexts, and the
/// lift's counters.
fn lifted_hit_prefetches(
    lift: bool,
    nine_every: u32,
    room: usize,
    pushed: PushedReader,
    claimer: bool,
) -> (usize, Option<LiftStats>) {
    let cfg = Config {
        hit_lookups: HitLookups::Throttled { gated: false },
        top_apart: true,
        lift_charged: lift,
        degree: 8,
        max_suffixes: 16,
        ..config(1)
    };
    let mut q = QuickMine::new(cfg).unwrap();
    let learned: Vec<Vec<Key>> = (30..=37).map(|b| vec![1, 2, b]).chain((9..=16).map(|b| vec![7, 8, b])).collect();
    let learned: Vec<(u32, &[Key])> = learned.iter().enumerate().map(|(i, s)| (i as u32, s.as_slice())).collect();
    run_contexts(&mut q, &learned, false);
    for b in 9..=12 {
        q.begin(50 + b as u32, 1);
        for block in [40, 41, b] {
            q.access(&demand(50 + b as u32, block), &|_| false, &mut Vec::new());
        }
        q.end(50 + b as u32);
    }
    let mut now = 0;
    let mut by_hits = 0;
    let mut partition: VecDeque<Key> = VecDeque::new();
    let mut read = |q: &mut QuickMine, ctx: u32, block: Key, partition: &mut VecDeque<Key>| {
        now += 200_000;
        let waiting = partition.iter().position(|&w| w == block).map(|i| partition.remove(i));
        let class = match (waiting, block) {
            (Some(_), _) => Class::Promote,
            (None, 7 | 8) => Class::Hit,
            (None, _) => Class::Miss,
        };
        let mut out = Vec::new();
        let cached = |b: Key| b == 7 || b == 8 || partition.contains(&b);
        q.access(&Demand { class, time_ns: now, ..demand(ctx, block) }, &cached, &mut out);
        if waiting.is_some() {
            q.outcome(block, true);
        }
        for &b in &out {
            partition.push_back(b);
            if partition.len() > room {
                let pushed = partition.pop_front().expect("over capacity");
                q.outcome(pushed, false);
            }
        }
        out.len()
    };
    for round in 100..1300u32 {
        q.begin(round, 0);
        read(&mut q, round, 1, &mut partition);
        read(&mut q, round, 2, &mut partition);
        read(&mut q, round, 7, &mut partition);
        let asked = read(&mut q, round, 8, &mut partition);
        if round >= 1000 {
            by_hits += asked;
        }
        if claimer {
            let other = 20_000 + round;
            q.begin(other, 1);
            read(&mut q, other, 40, &mut partition);
            read(&mut q, other, 41, &mut partition);
            q.end(other);
        }
        let nine = (round % nine_every == 0).then_some(9);
        // 9 after 30..=37: a rule 9 -> 30 would ask for 30 again.
        for b in (30..=37).filter(|_| pushed == PushedReader::Asker).chain(nine) {
            read(&mut q, round, b, &mut partition);
        }
        for b in partition.drain(..) {
            q.outcome(b, false);
        }
        q.end(round);
        if pushed == PushedReader::Later {
            let other = 10_000 + round;
            q.begin(other, 1);
            read(&mut q, other, 30, &mut partition);
            q.end(other);
        }
    }
    (by_hits, q.lift_stats())
}

#[test]
fn off_hit_lookups_are_lifted_while_what_they_age_out_costs_nothing() {
    // Not lifted, the off hit throttles let only their probes (one context
    // in 16, at half degree) ask.
    let (off, none) = lifted_hit_prefetches(false, 10, 8, PushedReader::Nobody, false);
    assert!(off <= 300 / PROBE_EVERY as usize * 8, "not lifted: {off} hit prefetches");
    assert_eq!(none, None, "no lift, no counters");
    // Lifted, with nothing missed after being pushed out: half degree (4 of
    // 8, the first block among them) in every context.
    let (lifted, stats) = lifted_hit_prefetches(true, 10, 8, PushedReader::Nobody, false);
    assert_eq!(lifted, 300 * 4, "lifted");
    let stats = stats.expect("the lift's counters");
    assert!(stats.added_asked >= 300 * 4 && stats.victims > 0, "{stats:?}");
    assert_eq!((stats.victims_charged, stats.gate_closings), (0, 0), "{stats:?}");
    // Lifted, but each context's hit prefetches push out blocks its own
    // context then misses, against one saved in 10 contexts: the gate
    // closes, and only its probes add to the throttles' own.
    let probes = (300 / PROBE_EVERY as usize + 1) * 4;
    let (costly, stats) = lifted_hit_prefetches(true, 10, 8, PushedReader::Asker, false);
    assert!(costly <= off + probes, "lifted at a cost: {costly} hit prefetches (not lifted: {off})");
    assert!(stats.is_some_and(|s| s.victims_charged > 0 && s.gate_closings > 0), "{stats:?}");
}

#[test]
fn a_victim_missed_after_its_asking_context_ended_is_charged() {
    // The pushed-out blocks are read by another transaction, after the one
    // that asked for them ended: round 15's memory, bound to the asking
    // context, never charged those misses and kept lifting (4 blocks in
    // every context); remembered by block, they close the gate.
    let (off, _) = lifted_hit_prefetches(false, 10, 8, PushedReader::Later, false);
    let (lifted, stats) = lifted_hit_prefetches(true, 10, 8, PushedReader::Later, false);
    let probes = (300 / PROBE_EVERY as usize + 1) * 4;
    assert!(lifted <= off + probes, "lifted though its victims missed later: {lifted} (not lifted: {off}), {stats:?}");
    let stats = stats.expect("the lift's counters");
    assert!(stats.victims_charged > 0 && stats.gate_closings > 0, "{stats:?}");
}

#[test]
fn an_added_prefetch_an_unlifted_lookup_claimed_saves_nothing() {
    // Lifted, the hit lookup at 8 adds 9..=12, and 9 is used one context
    // in 10. With no other lookup asking for them, each use is the lift's
    // saving; when another transaction's miss lookup, unlifted, finds them
    // waiting before 9 is read, it would have asked for them itself: the
    // uses are claimed, none saved.
    let (_, alone) = lifted_hit_prefetches(true, 10, 8, PushedReader::Nobody, false);
    let alone = alone.expect("the lift's counters");
    assert!(alone.added_used > 0 && alone.added_claimed == 0, "{alone:?}");
    let (_, claimed) = lifted_hit_prefetches(true, 10, 8, PushedReader::Nobody, true);
    let claimed = claimed.expect("the lift's counters");
    assert!(claimed.added_claimed > 0 && claimed.added_used == 0, "{claimed:?}");
}

#[test]
fn a_closed_lift_gate_makes_no_probes_of_its_own() {
    // Each context's lifted prefetches push out blocks then missed: the gate
    // closes, and from then on the hit lookups ask for no more than without
    // the lift (the throttles' own probes); probing the closed gate, one
    // lifted context in 16 would add its 4 blocks.
    for pushed in [PushedReader::Asker, PushedReader::Later] {
        let (off, _) = lifted_hit_prefetches(false, 10, 8, pushed, false);
        let (closed, stats) = lifted_hit_prefetches(true, 10, 8, pushed, false);
        assert!(closed <= off, "closed lift gate: {closed} hit prefetches (not lifted: {off}), {stats:?}");
        assert!(stats.is_some_and(|s| s.gate_closings > 0 && s.gate.probe_lookups == 0), "{stats:?}");
    }
}

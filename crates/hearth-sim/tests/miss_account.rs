//! The miss account (`hearth_prefetch::account`) on tiny traces built so
//! that each reason is forced, and on a generated workload where the
//! reasons must add up.

use hearth_core::Op;
use hearth_prefetch::account::{Account, LookupKind};
use hearth_sim::device::Device;
use hearth_sim::prefetch::{simulate, Outcome, PartitionShare, Setup};
use hearth_trace::ctx::CtxEvent;
use hearth_trace::workload::{generate, Kind, WorkloadConfig};

/// Builds traces context by context, one event per millisecond.
#[derive(Default)]
struct Trace {
    events: Vec<CtxEvent>,
    next_ctx: u32,
    fresh: u64,
    t: u64,
}

/// Templates of the helpers' contexts, apart from the ones under test.
const FILLER: u32 = 99;

impl Trace {
    fn tick(&mut self) -> u64 {
        self.t += 1_000_000;
        self.t
    }
    fn begin(&mut self, template: u32) -> u32 {
        let ctx = self.next_ctx;
        self.next_ctx += 1;
        let time_ns = self.tick();
        self.events.push(CtxEvent::Begin { time_ns, ctx, class: template });
        ctx
    }
    fn read(&mut self, ctx: u32, block: u64) {
        let time_ns = self.tick();
        self.events.push(CtxEvent::Io { time_ns, ctx, op: Op::Read, block });
    }
    fn end(&mut self, ctx: u32) {
        let time_ns = self.tick();
        self.events.push(CtxEvent::End { time_ns, ctx });
    }
    /// One whole context of `template` reading `blocks`.
    fn ctx(&mut self, template: u32, blocks: &[u64]) -> &mut Self {
        let ctx = self.begin(template);
        blocks.iter().for_each(|&b| self.read(ctx, b));
        self.end(ctx);
        self
    }
    /// A context reading `n` blocks never read before: pushes everything
    /// else out of a cache of fewer blocks.
    fn filler(&mut self, n: u64) -> &mut Self {
        let ctx = self.begin(FILLER);
        for _ in 0..n {
            self.fresh += 1;
            self.read(ctx, 1_000_000 + self.fresh);
        }
        self.end(ctx);
        self
    }
}

/// A cache of `blocks` one-byte blocks, `fraction` of it for prefetches,
/// everything counted.
fn setup(blocks: u64, fraction: f64) -> Setup {
    Setup {
        cache_bytes: blocks,
        partition: PartitionShare::Fixed(fraction),
        block_size: 1,
        main_policy: "lru".parse().unwrap(),
        warmup: 0.0,
        device: None,
        explain: true,
    }
}

fn account(trace: &Trace, spec: &str, setup: &Setup) -> (Outcome, Account) {
    let o = simulate(&trace.events, &spec.parse().unwrap(), setup).unwrap();
    let a = o.account.clone().expect("explain asks for the account");
    assert_eq!(a.misses.total() - a.misses.too_late, a.predictable_misses, "{a:?}");
    assert_eq!(a.evicted.total(), a.misses.evicted, "the split adds up: {a:?}");
    let p = &a.pollution;
    assert_eq!(p.total(), a.misses.pollution, "the split adds up: {a:?}");
    assert_eq!(p.otherwise.total(), p.not_waiting + p.own_earlier + p.other_context, "{a:?}");
    assert_eq!(a.throttle.iter().map(|r| r.throttled_misses).sum::<u64>(), a.misses.throttled, "{a:?}");
    assert_eq!(a.wasted.dropped_before_use + a.wasted.mispredicted, o.stats.wasted, "{a:?}");
    (o, a)
}

/// A template's first reads have no two-block prefix, so the paper's
/// QuickMine never has a rule for them, though the oracle (which counts a
/// context's start as a history entry) has seen them.
#[test]
fn reads_with_no_rule_at_all_are_cold() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2]).filler(10).ctx(0, &[1, 2]);
    let (_, a) = account(&t, "quickmine", &setup(4, 0.5));
    assert_eq!((a.predictable_misses, a.misses.cold), (2, 2), "{a:?}");
}

/// With room for one prefix, a later template's rule pushes out the one
/// that would have predicted 3.
#[test]
fn a_rule_pushed_out_of_the_rule_cache_is_evicted() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 3]).ctx(0, &[7, 8, 9]).filler(10).ctx(0, &[1, 2, 3]);
    let (_, a) = account(&t, "quickmine:prefixes=1", &setup(4, 0.5));
    assert_eq!((a.misses.evicted, a.misses.cold), (1, 2), "{a:?}");
    assert_eq!(a.evicted.prefix_evicted.two_block, 1, "the prefix 1 2 was not held: {a:?}");
    let (_, roomy) = account(&t, "quickmine", &setup(4, 0.5));
    assert_eq!(roomy.misses.evicted, 0, "{roomy:?}");
}

/// With one suffix per prefix and no grace, 4 replaces 3 under 1 2: the
/// prefix is held, the rule to 3 is not.
#[test]
fn a_suffix_pushed_out_of_a_full_list_is_suffix_replaced() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 3]).ctx(0, &[1, 2, 4]).filler(10).ctx(0, &[1, 2, 3]);
    let (_, a) = account(&t, "quickmine:suffixes=1,grace=0", &setup(4, 0.5));
    assert_eq!(a.misses.evicted, 1, "{a:?}");
    assert_eq!(a.evicted.suffix_replaced.two_block, 1, "{a:?}");
    let (_, roomy) = account(&t, "quickmine:suffixes=2,grace=0", &setup(4, 0.5));
    assert_eq!(roomy.misses.evicted, 0, "both suffixes fit: {roomy:?}");
}

/// `qm-fallback` asks for a one-block or position rule only once it has
/// followed its key twice: 5 -> 3 seen once is held below support, seen
/// twice it is asked for.
#[test]
fn a_fallback_rule_seen_once_is_below_support() {
    let mut t = Trace::default();
    t.ctx(0, &[5, 3]).filler(10).ctx(0, &[5, 3]);
    let (_, a) = account(&t, "qm-fallback", &setup(4, 0.5));
    assert_eq!(a.misses.evicted, 1, "{a:?}");
    assert_eq!(a.evicted.below_support.one_block, 1, "the one-block key is looked up first: {a:?}");
    t.filler(10).ctx(0, &[5, 3]);
    let (_, twice) = account(&t, "qm-fallback", &setup(4, 0.5));
    assert_eq!(twice.evicted.below_support.one_block, 1, "the third read of 3 is asked for: {twice:?}");
    assert_eq!(twice.misses.evicted, 1, "{twice:?}");
}

/// A context whose first block is new finds only the position rule
/// (position 0 -> 3, seen once): below support, of the position kind.
#[test]
fn a_position_rule_seen_once_is_below_support_by_position() {
    let mut t = Trace::default();
    t.ctx(0, &[5, 3]).filler(10).ctx(0, &[6, 3]);
    let (_, a) = account(&t, "qm-fallback", &setup(4, 0.5));
    assert_eq!(a.misses.evicted, 1, "{a:?}");
    assert_eq!(a.evicted.below_support.position, 1, "{a:?}");
    assert_eq!(a.evicted.below_support.one_block, 0, "no rule from 6 was ever mined: {a:?}");
}

/// 1 2 was followed by 4 three times and by 3 once: with degree 1 the
/// lookup asks for 4 only.
#[test]
fn a_candidate_below_the_degree_is_outranked() {
    let mut t = Trace::default();
    for _ in 0..3 {
        t.ctx(0, &[1, 2, 4]);
    }
    t.ctx(0, &[1, 2, 3]).filler(20).ctx(0, &[1, 2, 3]);
    let last = account(&t, "quickmine:degree=1", &setup(8, 0.25)).1;
    let mut without_last = Trace::default();
    for _ in 0..3 {
        without_last.ctx(0, &[1, 2, 4]);
    }
    without_last.ctx(0, &[1, 2, 3]).filler(20);
    let before = account(&without_last, "quickmine:degree=1", &setup(8, 0.25)).1;
    assert_eq!(last.misses.outranked - before.misses.outranked, 1, "{last:?}");
    let wide = account(&t, "quickmine:degree=2", &setup(8, 0.25)).1;
    assert_eq!(wide.misses.outranked, before.misses.outranked, "with degree 2 both are asked for: {wide:?}");
}

/// The pollution split's cases, in its order: pushed out, dropped at a
/// demand, predicted but not waiting, own earlier, other context.
fn pollution_cases(a: &Account) -> [u64; 5] {
    a.pollution.rows().map(|r| r.1)
}

/// A one-block partition: 4 pushes 3 out before its read. 3 was a
/// candidate of the lookup at 2, so the drop is a real push-out.
#[test]
fn a_prefetch_dropped_before_its_read_is_pollution() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 3, 4]).filler(40).ctx(0, &[1, 2, 3, 4]);
    let (o, a) = account(&t, "quickmine", &setup(25, 0.04));
    assert_eq!(a.misses.pollution, 1, "{a:?}");
    assert_eq!(pollution_cases(&a), [1, 0, 0, 0, 0], "4 landed on 3: {a:?}");
    assert_eq!(a.wasted.dropped_before_use, 1, "{a:?}");
    assert!(o.stats.promotes >= 1, "4 was waiting when read");
}

/// 3 is asked for at 2, then another context's reads age it out of the
/// partition (one turnover of the main cache, no prefetch landing) before
/// its read: predicted, dropped at a demand.
#[test]
fn a_predicted_prefetch_aged_out_before_its_read_is_dropped_at_a_demand() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 3]).filler(20);
    let ctx = t.begin(0);
    t.read(ctx, 1);
    t.read(ctx, 2);
    t.filler(30);
    t.read(ctx, 3);
    t.end(ctx);
    let (_, a) = account(&t, "quickmine", &setup(8, 0.25));
    assert_eq!(a.misses.pollution, 1, "{a:?}");
    assert_eq!(pollution_cases(&a), [0, 1, 0, 0, 0], "{a:?}");
}

/// 1 2 was followed by 3 twice and by 31 32 33 once, so the lookup at 2
/// asks for 3 first and a one-block partition loses it to the next
/// landing. The context then reads three new blocks (lookups with no
/// candidates) and 3 at its sixth read, where an earlier context of its
/// template read it: a drop of its own prefetch, asked for before its last
/// three lookups, which would otherwise be cold.
#[test]
fn a_drop_of_an_own_prefetch_asked_for_before_the_last_lookups_is_own_earlier() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 3]).ctx(0, &[1, 2, 3]).ctx(0, &[1, 2, 31, 32, 33, 3]).filler(40);
    t.ctx(0, &[1, 2, 41, 42, 43, 3]);
    let (_, a) = account(&t, "quickmine", &setup(25, 0.04));
    assert_eq!(a.misses.pollution, 1, "{a:?}");
    assert_eq!(pollution_cases(&a), [0, 0, 0, 1, 0], "{a:?}");
    assert_eq!(a.pollution.otherwise.cold, 1, "{a:?}");
}

/// Template 0 learnt 1 2 -> 5; a later context of it asks for 5 and ends
/// without reading it, and 5 ages out. Template 1 then reads 5 first, as
/// it did before (predictable), with no rule for a first read: the wrong
/// prefetch of another context was dropped, which cost nothing.
#[test]
fn a_drop_of_another_contexts_wrong_prefetch_is_other_context() {
    let mut t = Trace::default();
    t.ctx(1, &[5]).ctx(0, &[1, 2, 5]).filler(20).ctx(0, &[1, 2, 6]).filler(40).ctx(1, &[5]);
    let (_, a) = account(&t, "quickmine", &setup(8, 0.25));
    assert_eq!(a.misses.pollution, 1, "{a:?}");
    assert_eq!(pollution_cases(&a), [0, 0, 0, 0, 1], "{a:?}");
    assert_eq!(a.pollution.otherwise.cold, 1, "{a:?}");
    assert_eq!(a.wasted.mispredicted, 1, "its asker never read 5: {a:?}");
}

/// A context of template 0 asks for 3 after 1 2 and ends without it; 3
/// ages out. The next context of template 0 hits on 2 (template 5 read it),
/// so its lookup there has 3 as a candidate but runs no prefetch: 3 was
/// predicted, but not waiting when it was; otherwise no lookup.
#[test]
fn a_drop_before_the_prediction_is_predicted_not_waiting() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 3]).filler(20).ctx(0, &[1, 2, 6]).filler(40).ctx(5, &[2]).ctx(0, &[1, 2, 3]);
    let (_, a) = account(&t, "quickmine", &setup(8, 0.25));
    assert_eq!(a.misses.pollution, 1, "{a:?}");
    assert_eq!(pollution_cases(&a), [0, 0, 1, 0, 0], "{a:?}");
    assert_eq!(a.pollution.otherwise.no_lookup, 1, "{a:?}");
}

/// 2 was read just before by another template, so it hits and triggers no
/// lookup, though the rule 1 2 -> 3 is there.
#[test]
fn a_rule_behind_a_hit_is_no_lookup() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 3]).filler(20).ctx(5, &[2]).ctx(0, &[1, 2, 3]);
    let (_, a) = account(&t, "quickmine", &setup(8, 0.25));
    assert_eq!(a.misses.no_lookup, 1, "{a:?}");
}

/// 3 is read at the third position of template 0 (the oracle's position
/// fact), but after 1 2 only 4 ever came: the lookup asks for 4, which
/// its context never reads.
#[test]
fn a_known_prefix_that_predicts_other_blocks_is_mispredicted() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 4]).ctx(0, &[5, 6, 3]).filler(20).ctx(0, &[1, 2, 3]).filler(20);
    let (_, a) = account(&t, "quickmine", &setup(8, 0.25));
    assert_eq!(a.misses.mispredicted, 1, "{a:?}");
    assert!(a.wasted.mispredicted >= 1, "4 was prefetched and never read: {a:?}");
}

/// 3 was cached when the lookup at 2 predicted it, so not asked for, and
/// another context's reads pushed it out before its read.
#[test]
fn a_candidate_cached_at_the_lookup_and_evicted_after_is_cached_then() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 3]).filler(20).ctx(7, &[3]);
    let ctx = t.begin(0);
    t.read(ctx, 1);
    t.read(ctx, 2);
    t.filler(20);
    t.read(ctx, 3);
    t.end(ctx);
    let (_, a) = account(&t, "quickmine", &setup(8, 0.25));
    assert_eq!(a.misses.cached_then, 1, "{a:?}");
}

/// Template 0's prefetches of 3..7 are never used, so it is throttled off;
/// later contexts that do read 3 find the rule but prefetch nothing
/// (except the one in 16 that probes).
#[test]
fn a_rule_of_a_template_throttled_off_is_throttled() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 3, 4, 5, 6, 7]);
    for _ in 0..150 {
        t.ctx(0, &[1, 2]).filler(50);
    }
    for _ in 0..5 {
        t.ctx(0, &[1, 2, 3]).filler(50);
    }
    let (_, a) = account(&t, "quickmine", &setup(40, 0.25));
    assert!(a.misses.throttled >= 4, "{a:?}");
    let (_, free) = account(&t, "quickmine:throttle=false", &setup(40, 0.25));
    assert_eq!(free.misses.throttled, 0, "{free:?}");
    // The throttle's rows: template 0's base lookups, throttled; their
    // shadow would have had 3 waiting at each read of it.
    let row = a.throttle.iter().find(|r| r.template == 0 && r.kind == LookupKind::Base).expect("a row of template 0");
    assert_eq!(row.throttled_misses, a.misses.throttled, "{row:?}");
    assert!(row.throttled_lookups >= 4 && row.shadow_saved >= 4, "{row:?}");
    assert!(row.used * 7 < row.issued, "below the throttle's 0.15: {row:?}");
    // 3, the lowest of five blocks seen once each, is each lookup's first.
    assert!(row.shadow_top_used >= 4 && row.shadow_top_issued < row.shadow_issued, "{row:?}");
    assert!(row.top_issued >= 1 && row.top_issued < row.issued, "{row:?}");
    assert!(free.throttle.iter().all(|r| r.throttled_lookups == 0 && r.shadow_issued == 0), "{free:?}");
    // A one-block partition: 3, the first of 3..7, leaves the shadow
    // before its read.
    let (_, tiny) = account(&t, "quickmine", &setup(25, 0.04));
    let row =
        tiny.throttle.iter().find(|r| r.template == 0 && r.kind == LookupKind::Base).expect("a row of template 0");
    assert!(row.shadow_issued >= 4 && row.shadow_used == 0, "{row:?}");
}

/// With a device, a prefetch asked for at the read just before its own
/// has not started when it is demanded: a promote that waits.
#[test]
fn a_prefetch_not_started_by_its_demand_is_too_late() {
    let mut t = Trace::default();
    t.ctx(0, &[1, 2, 3]).filler(20).ctx(0, &[1, 2, 3]);
    let device = Device { latency_ns: 1_000_000, bytes_per_sec: u64::MAX };
    let (o, a) = account(&t, "quickmine", &Setup { device: Some(device), ..setup(8, 0.25) });
    assert_eq!((o.stats.promotes, a.misses.too_late), (1, 1), "{a:?}");
    let (_, untimed) = account(&t, "quickmine", &setup(8, 0.25));
    assert_eq!(untimed.misses.too_late, 0);
}

/// On a generated workload: every predictable miss gets one reason (the
/// `account` helper checks the sums), keeping the account changes nothing
/// in the run, and a scheme that does not report its lookups leaves every
/// reason but pollution unexplained.
#[test]
fn on_a_workload_the_reasons_add_up_and_change_nothing() {
    let events = generate(&WorkloadConfig { kind: Kind::Rubis, clients: 20, transactions: 600, seed: 1 }).unwrap();
    let s = Setup {
        block_size: 4096,
        cache_bytes: 4096 * 400,
        partition: PartitionShare::Fixed(0.04),
        warmup: 0.3,
        ..setup(0, 0.0)
    };
    let t = Trace { events, ..Trace::default() };
    for spec in ["quickmine", "qm-position", "qm-select"] {
        let (o, a) = account(&t, spec, &s);
        assert!(a.predictable_misses > 100, "{spec}: {a:?}");
        assert_eq!(a.predictable_misses, o.remaining.in_context_dropped + o.remaining.in_context_not_prefetched);
        assert_eq!(a.misses.unexplained, 0, "{spec}");
        let plain = simulate(&t.events, &spec.parse().unwrap(), &Setup { explain: false, ..s.clone() }).unwrap();
        assert_eq!(plain.stats, o.stats, "{spec}: the account changed the run");
        assert!(plain.account.is_none());
    }
    let (_, borg) = account(&t, "borg", &s);
    assert_eq!(borg.misses.unexplained + borg.misses.pollution, borg.predictable_misses, "{borg:?}");
}

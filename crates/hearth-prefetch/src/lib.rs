//! Prefetching for the storage cache, sans I/O: prefetchers see events
//! (context begin/end, demand accesses with their cache outcome, and whether
//! a prefetched block was used or evicted unused) and answer with blocks to
//! prefetch. The trace simulator and the NBD server drive them the same way,
//! and both show them demand *reads* only: a whole-block write needs no data
//! from the device, so learning write patterns would only predict reads
//! nobody waits for.
//!
//! - [`cache::PrefetchCache`]: the main cache plus a separate prefetch
//!   partition; classifies demand accesses as hit, promote or miss and counts
//!   prefetches issued, used and wasted.
//! - [`partition::Partition`]: that partition alone, which the server's
//!   block cache holds too.
//! - One file per prefetcher: [`seq`] (Linux-style read-ahead), [`run`]
//!   (run-based), [`cminer`] (C-Miner*, offline closed frequent sequences),
//!   [`borg`] (BORG-style correlation graph with chains), [`quickmine`]
//!   (context-aware online mining with throttling), [`guarded`] (QuickMine
//!   with extra rule kinds that only use spare budget), and libCacheSim's
//!   three: [`obl`] (one-block lookahead), [`pg`] (probability graph),
//!   [`mithril`] (timestamp-mined associations).
//! - [`direct::DirectCache`]: prefetching into the cache itself, as
//!   libCacheSim does (`hearth sim --prefetch`).
//! - [`metrics`]: what a context-tagged trace looks like to a prefetcher
//!   (sequential run length, interference, context length).
//! - [`ceiling`]: the most a prefetcher could cut: each miss sorted by what
//!   could have predicted it (its own template, another context, nothing).

pub mod account;
pub mod borg;
pub mod cache;
pub mod ceiling;
pub mod cminer;
pub mod direct;
mod error;
pub mod guarded;
pub mod metrics;
pub mod mithril;
pub mod obl;
pub mod partition;
pub mod pg;
pub mod quickmine;
pub mod rules;
pub mod run;
pub mod select;
pub mod seq;
mod spec;
mod throttle;

pub use cache::{CacheShape, Class, PrefetchCache, Stats};
pub use error::PrefetchError;
pub use partition::Partition;
pub use spec::PrefetchSpec;
pub use throttle::GateStats;

use hearth_core::{CtxEvent, Key, Op};
use hearth_policy::param::Bound::{Exclusive, Unbounded};
use hearth_policy::param::Param;

/// A demand access as a prefetcher sees it, after the cache classified it.
#[derive(Clone, Copy, Debug)]
pub struct Demand {
    pub block: Key,
    pub ctx: u32,
    pub time_ns: u64,
    pub op: Op,
    pub class: Class,
}

/// The prefetcher interface. `cached` tells whether a block is already in
/// the cache or on its way (so a prefetcher can pick the best blocks that
/// are not); the caller issues the blocks pushed to `out` in order, skipping
/// any that are cached after all.
pub trait Prefetcher: Send {
    fn name(&self) -> String;
    /// Context `ctx` of template `class` begins.
    fn begin(&mut self, _ctx: u32, _class: u32) {}
    /// Context `ctx` ends.
    fn end(&mut self, _ctx: u32) {}
    fn access(&mut self, d: &Demand, cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>);
    /// [`Prefetcher::access`] for a driver whose partition has a spare tier:
    /// `cached` is false for blocks waiting (or on their way) only as spare
    /// prefetches, which `spare` tells. A block `out` asks for that waits as
    /// a spare one is taken over by the base tier, with no new read. Only
    /// the guarded QuickMine tells the two apart; every other prefetcher
    /// sees spare blocks as cached.
    fn access_tiered(
        &mut self,
        d: &Demand,
        cached: &dyn Fn(Key) -> bool,
        spare: &dyn Fn(Key) -> bool,
        out: &mut Vec<Key>,
    ) {
        self.access(d, &|k| cached(k) || spare(k), out);
    }
    /// The cache the driver lands prefetched blocks in has this shape.
    /// Drivers tell every prefetcher once, before the first event; only
    /// the selecting QuickMine uses it (its shadow caches take the shape).
    fn shape_cache(&mut self, _shape: &CacheShape) -> Result<(), PrefetchError> {
        Ok(())
    }
    /// Every demand access the cache sees, reads and writes, before the
    /// read's [`Prefetcher::access`]: only the selecting QuickMine uses
    /// them (its shadow caches must take the same demands as the cache).
    fn demand_seen(&mut self, _block: Key, _op: Op) {}
    /// A block this prefetcher asked for was demanded (`used`) or evicted
    /// from the prefetch partition without being demanded.
    fn outcome(&mut self, _block: Key, _used: bool) {}
    /// A demand missed `block`, which the main cache gave up while spare
    /// prefetches held room it would have kept it in: what the spare tier
    /// cost ([`Partition::displaced_miss`]).
    fn displaced(&mut self, _block: Key) {}
    /// Blocks to prefetch only into the room base prefetches leave in the
    /// prefetch partition (its spare tier), asked for by the last `access`
    /// after the blocks it pushed to `out`: the caller issues them after
    /// those, and each may push out only another spare block, never one
    /// `out` asked for. Only the guarded QuickMine has any.
    fn take_spare(&mut self, _spare: &mut Vec<Key>) {}
    /// Rules or correlations currently held, for reports (0 if none).
    fn rule_count(&self) -> usize {
        0
    }
    /// Bytes a block this prefetcher asks for takes in a cache of objects
    /// of any size ([`direct::DirectCache`] in object mode); `None`: the
    /// size of the block's last demand. Only OBL, which prefetches blocks
    /// never demanded, says.
    fn object_size(&self) -> Option<u32> {
        None
    }
    /// How many times a block this prefetcher asked for goes back to the
    /// insertion point instead of being evicted before any demand, where
    /// prefetched blocks share the cache with demanded ones
    /// ([`direct::DirectCache`]): Mithril's `cycle-time` less one (AMP's
    /// idea). The prefetch partition has its own rule and ignores it.
    fn second_chances(&self) -> u32 {
        0
    }
    /// Starts reporting lookups for the miss account ([`account`]); returns
    /// whether this prefetcher can (the rule miners can).
    fn explain(&mut self) -> bool {
        false
    }
    /// What the last `access` looked up, once [`Prefetcher::explain`] is on.
    fn last_lookup(&self) -> Option<&account::Lookup> {
        None
    }
    /// When rule `key -> block` was first mined (the rule table's clock).
    fn first_mined(&self, _key: &rules::PrefixKey, _block: Key) -> Option<u64> {
        None
    }
    /// What this prefetcher's net-benefit gate did so far, if it has one
    /// (`qm-hits-gated`, `qm-guarded`).
    fn gate_stats(&self) -> Option<GateStats> {
        None
    }
    /// What the lift of off hit lookups did so far, if it has one
    /// (`qm-hits-lift-margin`).
    fn lift_stats(&self) -> Option<quickmine::LiftStats> {
        None
    }
}

/// Whether a demand outcome should trigger a prediction: a miss, or a
/// promote (a miss that an earlier prefetch avoided, so the stream the
/// prefetcher follows goes on).
pub fn is_trigger(class: Class) -> bool {
    matches!(class, Class::Miss | Class::Promote)
}

/// Never prefetching: the baseline.
pub struct NoPrefetch;

impl Prefetcher for NoPrefetch {
    fn name(&self) -> String {
        "none".into()
    }
    fn access(&mut self, _: &Demand, _: &dyn Fn(Key) -> bool, _: &mut Vec<Key>) {}
}

/// The parameters of a [`PrefetchSpec`], as its builder reads them.
pub struct Params<'a> {
    /// The spec as written back, for messages.
    scheme: String,
    pairs: &'a [(String, String)],
}

impl Params<'_> {
    /// Whether the spec sets `key`.
    pub fn has(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == key)
    }
    pub fn get<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, PrefetchError> {
        match self.pairs.iter().find(|(k, _)| k == key) {
            None => Ok(default),
            Some((_, v)) => v.parse().map_err(|_| PrefetchError::BadValue {
                scheme: self.scheme.clone(),
                key: key.to_string(),
                value: v.to_string(),
            }),
        }
    }
}

/// `(name, parameters, description)` of every scheme [`build`] knows; a
/// spec's parameters are checked against its row when it is parsed.
pub const SCHEMES: &[(&str, &[Param], &str)] = &[
    ("none", &[], "no prefetching"),
    ("seq", &[Param::whole("max", 0, u64::MAX)], "Linux-style read-ahead: current and ahead windows doubling up to max bytes (128KiB)"),
    ("run", &[Param::whole("trigger", 0, u64::MAX), Param::whole("depth", 0, u64::MAX), Param::whole("jump", 0, u64::MAX)], "run-based: prefetch depth blocks (16) once a run spans trigger bytes (32KiB); jumps of up to jump blocks (4)"),
    ("cminer", &[Param::whole("segment", 0, usize::MAX as u64), Param::whole("gap", 0, usize::MAX as u64), Param::whole("support", 0, u32::MAX as u64), Param::number("confidence", Unbounded, Unbounded), Param::whole("degree", 0, usize::MAX as u64)], "C-Miner*: closed frequent sequences mined offline from the warm-up part"),
    ("borg", &[Param::word("weight", &["freq", "time"]), Param::whole("depth", 0, usize::MAX as u64), Param::whole("window", 0, usize::MAX as u64)], "BORG-style correlation graph: weight=freq|time, chain depth (3), window of predecessors (2)"),
    ("quickmine", QUICKMINE_PARAMS, "QuickMine: per-context rules a&b->c, lookahead g (5), rule cache of prefixes (16384) x suffixes (8), grace (4), degree (5), throttle (true), context (true), lookups on promotes too (true)"),
    ("qm-orders", VARIANT_PARAMS, "QuickMine with variable-order rules: prefixes of 1..=orders (3) blocks, the longest first, shorter ones fill the degree"),
    ("qm-position", VARIANT_PARAMS, "QuickMine with rules keyed by template + position as well (position=true)"),
    ("qm-ahead", VARIANT_PARAMS, "QuickMine looking up ahead (2) steps along the guessed next reads, degree blocks each"),
    ("qm-timely", VARIANT_PARAMS, "QuickMine counting a prefetch demanded within late_us (100) µs of its issue as wasted when throttling"),
    ("qm-best", VARIANT_PARAMS, "the four QuickMine variants together: orders 1-3, position, ahead 2, late_us 100"),
    ("obl", &[Param::whole("sequential-confidence-k", 1, usize::MAX as u64), Param::whole("block-size", 1, u32::MAX as u64)], "one-block lookahead (libCacheSim's OBL): the next block once the last sequential-confidence-k (4) requests ran up to this one; block-size (512) bytes per prefetched object in an object cache"),
    ("pg", &[Param::whole("lookahead-range", 1, 100), Param::whole("block-size", 1, u64::MAX), SHARE.named("max-metadata-size"), SHARE.named("prefetch-threshold")], "probability graph (libCacheSim's PG): successors within lookahead-range (20) requests whose share passes prefetch-threshold (0.05); graph up to max-metadata-size (0.1) x block-size (1) x cache bytes"),
    ("mithril", MITHRIL_PARAMS, "Mithril (libCacheSim's): blocks recurring at nearby times (lookahead-range 20, min-support 2, max-support 8, confidence 1), mined every mining-threshold (5120) / min-support blocks, pf-list-size (2) per block, rec-trigger miss|each_req, cycle-time (2)"),
    ("qm-account", VARIANT_PARAMS, "QuickMine with the remedies the miss account chose (docs/dev/prefetch-miss-account-remedies.md): orders 1-3, position rules, lookups on hits, 65536 prefixes per rule kind x 32 suffixes"),
    ("qm-fallback", VARIANT_PARAMS, "QuickMine with the second-round remedies (docs/dev/prefetch-fallback-remedies.md): one-block, then position rules only where the two-block rule has no candidate, support >= 2, each throttled on its own; 65536 prefixes per rule kind x 32 suffixes"),
    ("qm-hits-gated", VARIANT_PARAMS, "qm-fallback, and every hit looks rules up, its prefetches throttled per template on their own, all of them gated by net benefit (qm-guarded's gate: over 64 events, open while their prefetches used in time are at least the miss lookups' prefetches they pushed out and a demand then missed; closed, one hit lookup in 16) (docs/dev/prefetch-hit-lookup-remedies.md, round 6)"),
    ("qm-hits-top", VARIANT_PARAMS, "qm-hits-gated, with each kind's per-template throttle split in two: one judging the first block each lookup asks for, one the rest, so a lookup whose best candidate pays keeps asking for it (docs/dev/prefetch-degree-ceiling.md, round 9)"),
    ("qm-hits-pooled", VARIANT_PARAMS, "qm-hits-top, plus one-block rules counted over all templates (support >= 2), looked up after the template's own one-block rule as a one-block fallback; 65536 more prefixes for them (docs/dev/prefetch-graph-remedies.md, round 14)"),
    ("qm-hits-lift-margin", VARIANT_PARAMS, "qm-hits-pooled, and a context whose template's hit throttle is off makes its hit lookups at half degree anyway while one net-benefit gate over the ranks the lift adds is open (saved at least twice the cost over its last 64 events): saved, an added prefetch used in time that no unlifted lookup claimed while it waited; cost, any other prefetch it aged out of the partition that any context then missed within one partition turnover; closed, it lifts nothing and samples the hit throttles' own probes (docs/dev/prefetch-lsm-remedies.md, rounds 17 and 20)"),
    ("qm-select", &[], "QuickMine and its five variants (orders, position, ahead, timely, best) each on a shadow of the cache; the cache follows the paper's until another shows significantly fewer misses (sign test, z >= 3)"),
    ("qm-guarded", GUARDED_PARAMS, "the paper's QuickMine unchanged, plus extra candidates (orders 3 and 1, position, one step ahead), each kind throttled on its own (late_us 100), only into the prefetch partition's spare room"),
];

/// A share strictly between 0 and 1.
const SHARE: Param = Param::number("share", Exclusive(0.0), Exclusive(1.0));
const MITHRIL_PARAMS: &[Param] = &[
    Param::whole("lookahead-range", 1, 100),
    Param::whole("max-support", 0, i32::MAX as u64),
    Param::whole("min-support", 1, i32::MAX as u64),
    Param::whole("confidence", 1, 100),
    Param::whole("pf-list-size", 1, 100),
    Param::word("rec-trigger", &["miss", "each_req"]),
    Param::whole("block-size", 1, u64::MAX),
    SHARE.named("max-metadata-size"),
    Param::whole("cycle-time", 1, 100),
    Param::whole("mining-threshold", 0, i32::MAX as u64),
];
const G: Param = Param::whole("g", 1, usize::MAX as u64);
const PREFIXES: Param = Param::whole("prefixes", 0, usize::MAX as u64);
const SUFFIXES: Param = Param::whole("suffixes", 0, usize::MAX as u64);
const GRACE: Param = Param::whole("grace", 0, u32::MAX as u64);
const DEGREE: Param = Param::whole("degree", 0, usize::MAX as u64);
const LATE_US: Param = Param::whole("late_us", 0, u64::MAX);
const QUICKMINE_PARAMS: &[Param] =
    &[G, PREFIXES, SUFFIXES, GRACE, DEGREE, Param::flag("throttle"), Param::flag("context"), Param::flag("promote")];
const GUARDED_PARAMS: &[Param] = &[G, PREFIXES, SUFFIXES, GRACE, DEGREE, LATE_US];
const VARIANT_PARAMS: &[Param] = &[
    G,
    PREFIXES,
    SUFFIXES,
    GRACE,
    DEGREE,
    Param::flag("throttle"),
    Param::flag("context"),
    Param::flag("promote"),
    Param::whole("orders", 1, 3),
    Param::flag("position"),
    Param::whole("ahead", 1, usize::MAX as u64),
    LATE_US,
];

/// Checks across one scheme's parameters, with defaults filled in
/// (Mithril's supports and mining threshold), without building it.
fn relation(name: &str, p: &Params) -> Result<(), PrefetchError> {
    match name {
        "mithril" => mithril_config(p)?.check(),
        _ => Ok(()),
    }
}

/// Builds a prefetcher from a spec written in code, like `"seq"` or
/// `"quickmine:g=5"`; input from outside is parsed once into a
/// [`PrefetchSpec`] at the edge instead.
/// `training` is the warm-up part of the trace (offline miners learn from it).
pub fn build(spec: &str, block_size: u32, training: &[CtxEvent]) -> Result<Box<dyn Prefetcher>, PrefetchError> {
    spec.parse::<PrefetchSpec>()?.build(block_size, training)
}

/// The prefetcher `name` (a row of [`SCHEMES`]) with the parameters `p`,
/// whose names were checked against that row.
fn build_scheme(
    name: &str,
    p: &Params,
    block_size: u32,
    training: &[CtxEvent],
) -> Result<Box<dyn Prefetcher>, PrefetchError> {
    let bs = u64::from(block_size.max(1));
    Ok(match name {
        "none" => Box::new(NoPrefetch),
        "seq" => Box::new(seq::Seq::new((p.get("max", 131_072u64)? / bs).max(1))),
        "run" => Box::new(run::RunPrefetcher::new(
            (p.get("trigger", 32_768u64)? / bs).max(1),
            p.get("depth", 16)?,
            p.get("jump", 4)?,
        )),
        "cminer" => {
            let cfg = cminer::Config {
                segment: p.get("segment", 64)?,
                max_gap: p.get("gap", 4)?,
                min_support: p.get("support", 3)?,
                min_confidence: p.get("confidence", 0.3)?,
            };
            let blocks: Vec<Key> = training.iter().filter_map(read_block).collect();
            let rules = cminer::mine(blocks.chunks(cfg.segment.max(1)), &cfg);
            Box::new(cminer::CMiner::new(rules, p.get("degree", 4)?))
        }
        "borg" => {
            let weight: String = p.get("weight", "freq".to_string())?;
            let by_time = match weight.as_str() {
                "freq" => false,
                "time" => true,
                _ => return Err(PrefetchError::range("borg", format!("weight must be freq or time, not {weight:?}"))),
            };
            Box::new(borg::Borg::new(by_time, p.get("depth", 3)?, p.get("window", 2)?))
        }
        "quickmine"
        | "qm-orders"
        | "qm-position"
        | "qm-ahead"
        | "qm-timely"
        | "qm-best"
        | "qm-account"
        | "qm-fallback"
        | "qm-hits-gated"
        | "qm-hits-top"
        | "qm-hits-pooled"
        | "qm-hits-lift-margin" => Box::new(quickmine::QuickMine::new(quickmine_config(name, p)?)?),
        "qm-guarded" => {
            let mut base = quickmine::Config::paper(p.get("g", 5)?);
            base.max_prefixes = p.get("prefixes", base.max_prefixes)?;
            base.max_suffixes = p.get("suffixes", base.max_suffixes)?;
            base.grace = p.get("grace", base.grace)?;
            base.degree = p.get("degree", base.degree)?;
            let late_ns = p.get("late_us", 100u64)?.saturating_mul(1000);
            Box::new(guarded::Guarded::new(base, late_ns)?)
        }
        "obl" => Box::new(obl::Obl::new(p.get("sequential-confidence-k", 4)?, p.get("block-size", 512)?)?),
        "pg" => Box::new(pg::Pg::new(
            p.get("lookahead-range", 20)?,
            p.get("block-size", 1)?,
            p.get("max-metadata-size", 0.1)?,
            p.get("prefetch-threshold", 0.05)?,
        )?),
        "mithril" => Box::new(mithril::Mithril::new(mithril_config(p)?)?),
        "qm-select" => Box::new(select::Select::new(select_experts()?)?),
        _ => unreachable!("every SCHEMES entry has a builder"),
    })
}

/// The selecting QuickMine's experts ([`select::EXPERTS`]), each as its
/// own scheme is built with no parameters.
fn select_experts() -> Result<Vec<(&'static str, quickmine::Config)>, PrefetchError> {
    select::EXPERTS
        .iter()
        .map(|&v| Ok((v, quickmine_config(v, &Params { scheme: v.to_string(), pairs: &[] })?)))
        .collect()
}

/// The configuration of `quickmine` or one of its variants `qm-*`. The
/// variants' defaults were fixed before any comparison: prefixes of 1..=3
/// blocks (3 is the ceiling's default lookahead), two lookup steps ahead
/// (one past the mining window, keeping a trigger's prefetches within two
/// degrees), late = 100 µs (the device latency of the prefetch tables in
/// the crate's README), and a rule cache of 16,384 prefixes per kind of
/// rule mined, so each kind gets the paper's budget.
fn quickmine_config(name: &str, p: &Params) -> Result<quickmine::Config, PrefetchError> {
    let variant = name.strip_prefix("qm-");
    let account = variant == Some("account");
    let fallback = matches!(variant, Some("fallback" | "hits-gated" | "hits-top" | "hits-pooled" | "hits-lift-margin"));
    let on = |feature: &str| {
        variant == Some("best") || variant == Some(feature) || (account && matches!(feature, "orders" | "position"))
    };
    let mut cfg = quickmine::Config::paper(p.get("g", 5)?);
    if account {
        // The miss account's remedies (docs/dev/prefetch-miss-account-remedies.md),
        // fixed before any run: a rule cache 4x the paper's each way, and lookups on hits.
        cfg.max_prefixes *= 4;
        cfg.max_suffixes *= 4;
        cfg.hit_lookups = quickmine::HitLookups::Shared;
    }
    if fallback {
        // The second round's remedies (docs/dev/prefetch-fallback-remedies.md),
        // fixed before any run: the 4x rule table, one-block and position
        // rules as fallbacks with their own throttles.
        cfg.max_prefixes *= 4;
        cfg.max_suffixes *= 4;
        cfg.min_order = 1;
        cfg.fallback = true;
    }
    if matches!(variant, Some("hits-gated" | "hits-top" | "hits-pooled" | "hits-lift-margin")) {
        // The sixth round (docs/dev/prefetch-hit-lookup-remedies.md), on qm-fallback.
        cfg.hit_lookups = quickmine::HitLookups::Throttled { gated: true };
    }
    // Round 9 (docs/dev/prefetch-degree-ceiling.md), on qm-hits-gated.
    cfg.top_apart = matches!(variant, Some("hits-top" | "hits-pooled" | "hits-lift-margin"));
    // Round 14 (docs/dev/prefetch-graph-remedies.md), on qm-hits-top.
    cfg.pooled = matches!(variant, Some("hits-pooled" | "hits-lift-margin"));
    // Round 17's second design with round 20's margin (docs/dev/prefetch-lsm-remedies.md), on qm-hits-pooled.
    cfg.lift_charged = variant == Some("hits-lift-margin");
    if on("orders") || p.has("orders") {
        cfg.min_order = 1;
        cfg.max_order = p.get("orders", 3)?;
    }
    cfg.by_position = p.get("position", on("position") || fallback)?;
    cfg.ahead = p.get("ahead", if on("ahead") { 2 } else { 1 })?;
    cfg.late_ns = p.get("late_us", if on("timely") { 100u64 } else { 0 })?.saturating_mul(1000);
    cfg.max_prefixes = p.get("prefixes", cfg.max_prefixes * cfg.rule_kinds())?;
    cfg.max_suffixes = p.get("suffixes", cfg.max_suffixes)?;
    cfg.grace = p.get("grace", cfg.grace)?;
    cfg.degree = p.get("degree", cfg.degree)?;
    cfg.throttle = p.get("throttle", cfg.throttle)?;
    cfg.context_aware = p.get("context", cfg.context_aware)?;
    cfg.on_promote = p.get("promote", cfg.on_promote)?;
    Ok(cfg)
}

/// Mithril's configuration: libCacheSim's defaults, and its parameter names.
fn mithril_config(p: &Params) -> Result<mithril::Config, PrefetchError> {
    let d = mithril::Config::libcachesim();
    let trigger: String = p.get("rec-trigger", "miss".to_string())?;
    let each_request = match trigger.as_str() {
        "miss" => false,
        "each_req" => true,
        _ => {
            return Err(PrefetchError::range(
                "mithril",
                format!("rec-trigger must be miss or each_req, not {trigger:?}"),
            ))
        }
    };
    Ok(mithril::Config {
        lookahead: p.get("lookahead-range", d.lookahead)?,
        max_support: p.get("max-support", d.max_support)?,
        min_support: p.get("min-support", d.min_support)?,
        confidence: p.get("confidence", d.confidence)?,
        pf_list_size: p.get("pf-list-size", d.pf_list_size)?,
        each_request,
        block_size: p.get("block-size", d.block_size)?,
        max_metadata: p.get("max-metadata-size", d.max_metadata)?,
        cycle_time: p.get("cycle-time", d.cycle_time)?,
        mining_threshold: p.get("mining-threshold", d.mining_threshold)?,
    })
}

/// The block of a read event (what prefetchers learn from).
pub fn read_block(e: &CtxEvent) -> Option<Key> {
    match *e {
        CtxEvent::Io { block, op: hearth_core::Op::Read, .. } => Some(block),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_build_and_bad_specs_say_what_is_wrong() {
        for (name, _, _) in SCHEMES {
            assert!(build(name, 4096, &[]).is_ok(), "{name}");
        }
        assert_eq!(build("quickmine:g=3,context=false", 4096, &[]).unwrap().name(), "QuickMine(no context)");
        assert_eq!(build("qm-best", 4096, &[]).unwrap().name(), "QuickMine(orders 1-3, position, ahead 2, timely)");
        assert_eq!(build("qm-account", 4096, &[]).unwrap().name(), "QuickMine(orders 1-3, position, lookups on hits)");
        assert_eq!(build("qm-fallback", 4096, &[]).unwrap().name(), "QuickMine(orders 1-2, position, fallback)");
        assert_eq!(build("qm-position:orders=2", 4096, &[]).unwrap().name(), "QuickMine(orders 1-2, position)");
        let err_text = |spec: &str| build(spec, 4096, &[]).err().unwrap().to_string();
        assert!(err_text("nope").contains("unknown prefetcher \"nope\""));
        assert!(err_text("seq:depth=3").contains("has no parameter \"depth\""));
        assert!(err_text("run:depth=x").contains("bad value \"x\" for \"depth\""));
        assert!(err_text("borg:weight=size").contains("\"freq\" or \"time\""));
        assert!(err_text("quickmine:g=0").contains("at least 1"));
        assert!(err_text("seq:max").contains("not key=value"));
        assert!(err_text("quickmine:orders=3").contains("has no parameter \"orders\""));
        assert_eq!(err_text("qm-orders:orders=4"), "qm-orders: orders must be between 1 and 3, got 4");
        assert!(err_text("qm-ahead:ahead=0").contains("ahead must be at least 1"));
        assert!(err_text("obl:sequential-confidence-k=0").contains("at least 1"));
        assert!(err_text("pg:prefetch-threshold=1.5").contains("prefetch-threshold"));
        assert!(err_text("mithril:rec-trigger=evict").contains("\"miss\" or \"each_req\""));
        assert_eq!(err_text("mithril:min-support=9"), "mithril: max-support must be at least min-support");
        assert_eq!(build("mithril:min-support=3,max-support=9", 4096, &[]).unwrap().name(), "Mithril");
    }
}

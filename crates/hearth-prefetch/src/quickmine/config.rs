//! QuickMine's configuration: which of the paper's parameters and which
//! variants (the module doc of [`super`]) a miner runs with.

/// Fewest times a fallback suffix must have followed its key to be asked for.
pub const FALLBACK_SUPPORT: u32 = 2;

/// Which hits look rules up (a miss or promote always does, as the paper's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitLookups {
    /// None (the paper).
    Never,
    /// Every hit, its prefetches throttled with those of misses.
    Shared,
    /// Every hit, its prefetches a kind of their own with their own
    /// per-template throttle. `gated`: all of them issue only while a
    /// [`NetGate`](crate::throttle::NetGate) over their prefetches used in time against the miss
    /// lookups' prefetches they pushed out of the partition and a demand
    /// then missed is open.
    Throttled { gated: bool },
}

/// Class of I/O outside any begun context.
pub const NO_CLASS: u32 = u32::MAX;

/// The class of pooled one-block rules' keys: every template's at once.
pub const ANY_CLASS: u32 = u32::MAX - 1;

#[derive(Clone, Debug)]
pub struct Config {
    /// G: suffixes per prefix occurrence.
    pub lookahead: usize,
    pub max_prefixes: usize,
    pub max_suffixes: usize,
    pub grace: u32,
    pub degree: usize,
    pub throttle: bool,
    /// Off: one sequence for the whole interleaved stream (the
    /// context-oblivious variant, for comparison; being one endless
    /// context, its degree is set once and never throttled).
    pub context_aware: bool,
    /// Also look rules up on promotes, not only on misses (a promote is a
    /// miss an earlier prefetch avoided; looking up keeps the context's
    /// prefetching ahead of it).
    pub on_promote: bool,
    /// Prefix lengths mined and looked up (the paper: 2..=2).
    pub min_order: usize,
    pub max_order: usize,
    /// Rules keyed by template and position as well.
    pub by_position: bool,
    /// Lookup steps along the guessed next reads (the paper: 1).
    pub ahead: usize,
    /// A prefetch demanded sooner than this after its issue counts as
    /// wasted (0: off, as in the paper).
    pub late_ns: u64,
    /// Which hits look rules up too, not only misses and promotes (none in
    /// the paper; the miss account's "no lookup").
    pub hit_lookups: HitLookups,
    /// One-block and position rules only where the longest prefix has no
    /// candidate, with support and throttles of their own (needs orders
    /// 1..=2 and positions).
    pub fallback: bool,
    /// The first block a lookup asks for throttled apart from the rest,
    /// per kind and template.
    pub top_apart: bool,
    /// One-block rules also counted over all templates, looked up after
    /// the template's own (needs `fallback`).
    pub pooled: bool,
    /// A context whose template's hit throttle is off makes its hit
    /// lookups at half degree anyway, while the lift gate is open.
    pub lift_charged: bool,
}

impl Config {
    /// The paper's QuickMine with lookahead `g` and its defaults otherwise.
    pub fn paper(g: usize) -> Config {
        Config {
            lookahead: g,
            max_prefixes: 16_384,
            max_suffixes: 8,
            grace: 4,
            degree: 5,
            throttle: true,
            context_aware: true,
            on_promote: true,
            min_order: 2,
            max_order: 2,
            by_position: false,
            ahead: 1,
            late_ns: 0,
            hit_lookups: HitLookups::Never,
            fallback: false,
            top_apart: false,
            pooled: false,
            lift_charged: false,
        }
    }

    /// Kinds of rule mined: one per prefix length, plus positions, plus
    /// pooled one-block rules.
    pub fn rule_kinds(&self) -> usize {
        self.max_order + 1 - self.min_order + usize::from(self.by_position) + usize::from(self.pooled)
    }
}

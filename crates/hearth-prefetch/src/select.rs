//! Selecting QuickMine (`qm-select`): the paper's QuickMine and each of its
//! issue-19 variants run side by side, each on a shadow of the cache, and
//! the cache follows the one that has shown significantly fewer misses.
//!
//! Why: every variant measured so far wins on some workloads and loses on
//! others (rules keyed by position cut misses by thousands where contexts
//! walk fresh keys in a fixed order, and add thousands where block rules
//! already predict well). Which one fits is a property of the workload, so
//! it is measured on it, online, at no cost to the cache: the comparison
//! runs on shadows (metadata only), never on the cache's own contents.
//!
//! Design, fixed before any comparison run:
//! - **Experts**: the paper's QuickMine ([`Config::paper`]) and the five
//!   variants `qm-orders`, `qm-position`, `qm-ahead`, `qm-timely`,
//!   `qm-best` with the parameters [`crate::build`] gives them. The paper's
//!   is the first and the leader at the start.
//! - **Shadows**: each expert drives its own [`PrefetchCache`] of the real
//!   cache's shape ([`CacheShape`]: main policy, bytes, prefetch share,
//!   block size): every demand the driver sees goes to every shadow
//!   ([`Prefetcher::demand_seen`]); each expert sees its shadow's outcome
//!   of a read, asks for blocks against its shadow's contents, its shadow
//!   takes them, and it learns (throttles) from its shadow's used and
//!   wasted prefetches. Each expert so runs exactly as it would alone.
//! - **Following**: on a read, the cache is asked for the leader's blocks
//!   (those the real cache does not hold). In the simulator the real cache
//!   is a [`PrefetchCache`] of the same shape, so while the paper's
//!   QuickMine leads, the cache is its shadow, state for state: the result
//!   is the paper's, miss for miss.
//! - **Switching**: the test is a sign test on the demands where two
//!   shadows disagree. For experts `a` and `b`, `n(a, b)` counts demands
//!   where `a`'s shadow missed and `b`'s did not, from the start. At
//!   checkpoints after 1,024 demands, then each time the count doubles, each
//!   challenger `c` scores `z = (n(leader, c) - n(c, leader)) / sqrt(n(leader,
//!   c) + n(c, leader))`; if the best score is at least [`SWITCH_Z`] (3),
//!   that challenger leads. Three standard deviations and doubling
//!   checkpoints (about 20 looks over 10^9 demands) keep a switch between
//!   two experts that are in truth equal rare (a one-sided 3 sigma is 0.13%
//!   per look), so where no variant is clearly better the paper's QuickMine
//!   stays in charge and the cache is its.
//! - **Without a shape** (a driver that never calls
//!   [`Prefetcher::shape_cache`]) there are no shadows: it is the paper's
//!   QuickMine.
//!
//! What it costs: one shadow cache's metadata and one expert per expert,
//! and six simulations per demand instead of one. What it cannot promise:
//! after a switch the cache is no expert's shadow any more (its contents
//! came from the earlier leader), so the result is the new leader's only
//! approximately; and the server's cache (prefetch partition beside its
//! main cache, and writes the prefetcher never sees) is modelled by its
//! shadows, not copied.

use hearth_core::{Key, Op};

use crate::cache::{CacheShape, Class, PrefetchCache};
use crate::quickmine::{Config, QuickMine};
use crate::{Demand, PrefetchError, Prefetcher};

/// The experts, as [`crate::build`] names them; the paper's first.
pub const EXPERTS: &[&str] = &["quickmine", "qm-orders", "qm-position", "qm-ahead", "qm-timely", "qm-best"];

/// The sign test's score at or above which a challenger takes the lead.
pub const SWITCH_Z: f64 = 3.0;
/// Demands before the first checkpoint; later ones come each time the
/// count doubles.
pub const FIRST_CHECKPOINT: u64 = 1024;

/// One expert and the shadow cache it runs on.
struct Shadow {
    expert: QuickMine,
    cache: PrefetchCache,
    /// The shadow's outcome of the demand being handled.
    class: Class,
    /// What the expert asked for on the last read.
    asked: Vec<Key>,
}

pub struct Select {
    /// The experts as configured; the paper's first. Used alone until a
    /// shape gives them shadows.
    configs: Vec<(&'static str, Config)>,
    /// The paper's QuickMine, run directly while there are no shadows.
    alone: Option<QuickMine>,
    shadows: Vec<Shadow>,
    leader: usize,
    /// `disagree[a * n + b]`: demands where `a`'s shadow missed and `b`'s did not.
    disagree: Vec<u64>,
    demands: u64,
    next_checkpoint: u64,
    /// Leaders in order, with the demand count at which each took over.
    switches: Vec<(u64, usize)>,
}

impl Select {
    /// `experts`: (name, configuration), the paper's first.
    pub fn new(experts: Vec<(&'static str, Config)>) -> Result<Self, PrefetchError> {
        let first = experts.first().ok_or_else(|| PrefetchError::range("qm-select", "needs at least one expert"))?;
        Ok(Select {
            alone: Some(QuickMine::new(first.1.clone())?),
            configs: experts,
            shadows: Vec::new(),
            leader: 0,
            disagree: Vec::new(),
            demands: 0,
            next_checkpoint: FIRST_CHECKPOINT,
            switches: vec![(0, 0)],
        })
    }

    /// The leading expert's name.
    pub fn leader(&self) -> &'static str {
        self.configs[self.leader].0
    }

    /// Each change of leader: (demands seen, expert name), the first at 0.
    pub fn switches(&self) -> Vec<(u64, &'static str)> {
        self.switches.iter().map(|&(at, i)| (at, self.configs[i].0)).collect()
    }

    fn checkpoint(&mut self) {
        let n = self.shadows.len();
        let l = self.leader;
        let score = |c: usize| {
            let (lost, won) = (self.disagree[l * n + c], self.disagree[c * n + l]);
            if lost + won == 0 {
                return 0.0;
            }
            (lost as f64 - won as f64) / ((lost + won) as f64).sqrt()
        };
        let best = (0..n).filter(|&c| c != l).map(|c| (c, score(c))).max_by(|x, y| x.1.total_cmp(&y.1));
        if let Some((c, z)) = best {
            if z >= SWITCH_Z {
                self.leader = c;
                self.switches.push((self.demands, c));
            }
        }
    }
}

impl Prefetcher for Select {
    fn name(&self) -> String {
        let leaders: Vec<String> = self
            .switches()
            .into_iter()
            .map(|(at, name)| if at == 0 { name.to_string() } else { format!("{name} from demand {at}") })
            .collect();
        format!("QuickMine(selecting; led by {})", leaders.join(", then "))
    }

    fn shape_cache(&mut self, shape: &CacheShape) -> Result<(), PrefetchError> {
        let mut shadows = Vec::with_capacity(self.configs.len());
        for (_, cfg) in &self.configs {
            shadows.push(Shadow {
                expert: QuickMine::new(cfg.clone())?,
                cache: PrefetchCache::with_shape(shape)?,
                class: Class::Hit,
                asked: Vec::new(),
            });
        }
        let n = shadows.len();
        self.shadows = shadows;
        self.disagree = vec![0; n * n];
        self.alone = None;
        Ok(())
    }

    fn begin(&mut self, ctx: u32, class: u32) {
        if let Some(q) = &mut self.alone {
            q.begin(ctx, class);
        }
        for s in &mut self.shadows {
            s.expert.begin(ctx, class);
        }
    }

    fn end(&mut self, ctx: u32) {
        if let Some(q) = &mut self.alone {
            q.end(ctx);
        }
        for s in &mut self.shadows {
            s.expert.end(ctx);
        }
    }

    fn demand_seen(&mut self, block: Key, op: Op) {
        if self.shadows.is_empty() {
            return;
        }
        for s in &mut self.shadows {
            s.class = s.cache.demand(block, op);
            if op != Op::Read {
                // No `access` follows: its outcomes reach the expert now,
                // as a driver hands them over after every demand.
                let expert = &mut s.expert;
                s.cache.drain_outcomes(|k, used| expert.outcome(k, used));
            }
        }
        let n = self.shadows.len();
        for a in 0..n {
            if self.shadows[a].class != Class::Miss {
                continue;
            }
            for b in 0..n {
                if self.shadows[b].class != Class::Miss {
                    self.disagree[a * n + b] += 1;
                }
            }
        }
        self.demands += 1;
        if self.demands == self.next_checkpoint {
            self.checkpoint();
            self.next_checkpoint *= 2;
        }
    }

    fn access(&mut self, d: &Demand, cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
        if let Some(q) = &mut self.alone {
            return q.access(d, cached, out);
        }
        for s in &mut self.shadows {
            s.asked.clear();
            let seen = Demand { class: s.class, ..*d };
            let cache = &s.cache;
            s.expert.access(&seen, &|k| cache.contains(k), &mut s.asked);
            for &k in &s.asked {
                s.cache.prefetch(k);
            }
            let expert = &mut s.expert;
            s.cache.drain_outcomes(|k, used| expert.outcome(k, used));
        }
        out.extend(self.shadows[self.leader].asked.iter().copied().filter(|&k| !cached(k)));
    }

    fn outcome(&mut self, block: Key, used: bool) {
        // With shadows each expert learns from its own outcomes.
        if let Some(q) = &mut self.alone {
            q.outcome(block, used);
        }
    }

    fn rule_count(&self) -> usize {
        self.leading().rule_count()
    }

    /// Every expert reports its lookups; the account reads the leader's
    /// (made against its shadow cache, which the cache follows).
    fn explain(&mut self) -> bool {
        self.alone.iter_mut().for_each(|q| _ = q.explain());
        self.shadows.iter_mut().for_each(|s| _ = s.expert.explain());
        true
    }

    fn last_lookup(&self) -> Option<&crate::account::Lookup> {
        self.leading().last_lookup()
    }

    fn first_mined(&self, key: &crate::rules::PrefixKey, block: Key) -> Option<u64> {
        self.leading().first_mined(key, block)
    }
}

impl Select {
    /// The expert whose blocks the cache is asked for.
    fn leading(&self) -> &QuickMine {
        match &self.alone {
            Some(q) => q,
            None => &self.shadows[self.leader].expert,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: u32 = 1;

    fn shape(total_bytes: u64) -> CacheShape {
        CacheShape { policy: "lru".parse().unwrap(), total_bytes, prefetch_fraction: 0.04, block_size: BLOCK }
    }

    /// One context event of a test stream.
    enum Event {
        Begin(u32, u32),
        Io(u32, Key, Op),
        End(u32),
    }

    /// Drives `p` over `events` as the simulator does, on a cache of
    /// `total_bytes` whose shape `p` is told if `shaped`; returns the
    /// cache's misses and every read's blocks.
    fn drive(p: &mut dyn Prefetcher, events: &[Event], total_bytes: u64, shaped: bool) -> (u64, Vec<Vec<Key>>) {
        let s = shape(total_bytes);
        let mut cache = PrefetchCache::with_shape(&s).unwrap();
        if shaped {
            p.shape_cache(&s).unwrap();
        }
        let mut asked = Vec::new();
        for (i, e) in events.iter().enumerate() {
            match *e {
                Event::Begin(ctx, class) => p.begin(ctx, class),
                Event::End(ctx) => p.end(ctx),
                Event::Io(ctx, block, op) => {
                    let class = cache.demand(block, op);
                    p.demand_seen(block, op);
                    let mut out = Vec::new();
                    if op == Op::Read {
                        let d = Demand { block, ctx, time_ns: i as u64 * 1000, op, class };
                        p.access(&d, &|k| cache.contains(k), &mut out);
                        asked.push(out.clone());
                    }
                    for &k in &out {
                        cache.prefetch(k);
                    }
                    cache.drain_outcomes(|k, used| p.outcome(k, used));
                }
            }
        }
        (cache.stats().misses, asked)
    }

    fn selecting() -> Select {
        Select::new(crate::select_experts().unwrap()).unwrap()
    }

    /// SplitMix64, for streams that do not depend on any crate's generator.
    fn mix(x: u64) -> u64 {
        let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce5_e9b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Contexts of two blocks, `a` then its partner `a + 1_000_000`, the
    /// first of 400 chosen at random: the paper's rules need two reads
    /// before they predict, so only rules on one block can fetch the
    /// partner ahead of its read.
    fn pairs(contexts: u32) -> Vec<Event> {
        let mut events = Vec::new();
        for ctx in 0..contexts {
            let a = mix(u64::from(ctx)) % 400;
            events.push(Event::Begin(ctx, 1));
            events.push(Event::Io(ctx, a, Op::Read));
            events.push(Event::Io(ctx, a + 1_000_000, Op::Read));
            events.push(Event::End(ctx));
        }
        events
    }

    #[test]
    fn it_follows_a_variant_that_misses_significantly_less() {
        let events = pairs(20_000);
        let paper = crate::build("quickmine", BLOCK, &[]).unwrap();
        let (mut paper, mut select) = (paper, selecting());
        let (paper_misses, _) = drive(paper.as_mut(), &events, 200, true);
        let (select_misses, _) = drive(&mut select, &events, 200, true);
        assert_ne!(select.leader(), "quickmine", "{:?}", select.switches());
        assert!(select_misses * 10 < paper_misses * 9, "{select_misses} misses vs the paper's {paper_misses}");
    }

    /// Contexts each walking one of 50 fixed sequences of eight blocks,
    /// with one I/O in five a write: the paper's rules predict most reads.
    fn walks(contexts: u32) -> Vec<Event> {
        let mut events = Vec::new();
        for ctx in 0..contexts {
            let walk = mix(u64::from(ctx)) % 50;
            events.push(Event::Begin(ctx, (walk % 3) as u32));
            for i in 0..8 {
                let op = if mix(u64::from(ctx) << 8 | i).is_multiple_of(5) { Op::Write } else { Op::Read };
                events.push(Event::Io(ctx, mix(walk * 8 + i) % 3_000, op));
            }
            events.push(Event::End(ctx));
        }
        events
    }

    /// The shadow mechanics alone: with the paper's QuickMine as both
    /// experts no shadow ever disagrees, so it leads throughout, and the
    /// cache must then be its shadow, request for request, writes and all.
    #[test]
    fn while_the_paper_leads_the_cache_is_the_papers_request_for_request() {
        let events = walks(3_000);
        let paper_cfg = crate::select_experts().unwrap().swap_remove(0);
        let mut select = Select::new(vec![paper_cfg.clone(), ("paper again", paper_cfg.1)]).unwrap();
        let mut paper = crate::build("quickmine", BLOCK, &[]).unwrap();
        let (paper_misses, paper_asked) = drive(paper.as_mut(), &events, 300, true);
        let (select_misses, select_asked) = drive(&mut select, &events, 300, true);
        assert_eq!(select.switches(), vec![(0, "quickmine")]);
        let asked: usize = paper_asked.iter().map(Vec::len).sum();
        assert!(asked > 1_000, "the paper's QuickMine asked for {asked} blocks");
        assert_eq!(select_asked, paper_asked);
        assert_eq!(select_misses, paper_misses);
    }

    #[test]
    fn without_a_shape_it_is_the_papers_quickmine() {
        let events = walks(3_000);
        let mut paper = crate::build("quickmine", BLOCK, &[]).unwrap();
        let alone = drive(paper.as_mut(), &events, 300, false);
        assert!(alone.1.iter().any(|a| !a.is_empty()), "the paper's QuickMine asked for something");
        assert_eq!(drive(&mut selecting(), &events, 300, false), alone);
    }
}

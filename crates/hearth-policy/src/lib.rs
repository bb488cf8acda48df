//! Replacement policies, one file each, and a registry that builds them from
//! a [`PolicySpec`] such as `"lru"`, `"lfu:aging=10000"` or `"mq:m=8"`,
//! parsed once at the edge (see [`spec`]).
//!
//! Adding a policy: one new file implementing `hearth_core::Policy` (its
//! constructor checks its parameters before sizing anything), one `mod` line
//! and one row in `REGISTRY`, which holds every fact about it: name,
//! parameters, group, family, whether it is offline, description, builder.

/// `capacity`, `occupancy`, `len` and `contains` for a policy whose resident
/// blocks are exactly the keys of its `index` map and whose `capacity` and
/// `used` fields count bytes (most policies here; ARC, LIRS, MQ and 2Q also
/// remember blocks they do not hold, so they answer themselves).
macro_rules! indexed_residency {
    () => {
        fn capacity(&self) -> u64 {
            self.capacity
        }
        fn occupancy(&self) -> u64 {
            self.used
        }
        fn len(&self) -> usize {
            self.index.len()
        }
        fn contains(&self, key: hearth_core::Key) -> bool {
            self.index.contains_key(&key)
        }
    };
}

/// `warm` (`hearth_core::Policy::warm`) for a policy whose `index` maps
/// keys to nodes of its `slab`: the lookup brings the index's line in, the
/// prefetch the node's.
macro_rules! warm_by_index {
    () => {
        fn warm(&self, key: hearth_core::Key) {
            if let Some(&i) = self.index.get(&key) {
                self.slab.prefetch(i);
            }
        }
        warm_index!();
    };
}

/// `warm_index` (`hearth_core::Policy::warm_index`) for a policy whose
/// `index` is a `hearth_core::KeyIndex`.
macro_rules! warm_index {
    () => {
        fn warm_index(&self, key: hearth_core::Key) {
            self.index.prefetch(key);
        }
    };
}

/// `remove` for a sampling policy: its dense array's `take(pos)` by the
/// position `index` holds.
macro_rules! remove_by_index {
    () => {
        fn remove(&mut self, key: hearth_core::Key) -> bool {
            let Some(&pos) = self.index.get(&key) else { return false };
            self.take(pos as usize);
            true
        }
    };
}

/// Removes `items[pos]` of a dense array that sampling policies draw from,
/// moving the last item into its place and keeping `index` (key to
/// position) right; returns the removed item.
fn swap_take<T>(
    items: &mut Vec<T>,
    index: &mut hearth_core::KeyMap<u32>,
    pos: usize,
    key: impl Fn(&T) -> hearth_core::Key,
) -> T {
    let item = items.swap_remove(pos);
    index.remove(&key(&item));
    if let Some(moved) = items.get(pos) {
        index.insert(key(moved), pos as u32);
    }
    item
}

/// `capacity`, `occupancy`, `len` and `contains` for a policy built on
/// [`three_queues::ThreeQueues`] (its `q` field), whose residents are the
/// small and main queues' items.
macro_rules! three_queue_residency {
    () => {
        fn capacity(&self) -> u64 {
            self.capacity
        }
        fn occupancy(&self) -> u64 {
            self.q.resident_bytes()
        }
        fn len(&self) -> usize {
            self.q.resident_len()
        }
        fn contains(&self, key: hearth_core::Key) -> bool {
            self.q.contains(key)
        }
    };
}

/// `warm` and `warm_index` for a policy built on
/// [`three_queues::ThreeQueues`] (its `q` field) that looks nothing else up.
macro_rules! three_queue_warm {
    () => {
        fn warm(&self, key: hearth_core::Key) {
            self.q.warm(key)
        }
        fn warm_index(&self, key: hearth_core::Key) {
            self.q.warm_index(key)
        }
    };
}

pub mod admission;
mod arc;
mod beladysize;
mod cacheus;
mod car;
mod clock;
mod clock2qplus;
mod clockpro;
mod crlfu;
mod error;
mod fbr;
mod fifo;
mod fifomerge;
mod gdsf;
mod hyperbolic;
mod learned;
mod lecar;
mod lfu;
mod lhd;
mod lirs;
mod lru;
mod lruk;
mod mq;
mod opt;
pub mod param;
mod qdlp;
mod random;
mod randomlru;
mod s3fifo;
mod s3fifod;
mod sieve;
mod size;
mod slru;
pub mod spec;
mod srlru;
mod three_queues;
mod twoq;
mod wtinylfu;

pub use admission::{Admitted, Lehmer64};
pub use arc::{Arc, Step as ArcStep};
pub use beladysize::BeladySize;
pub use cacheus::Cacheus;
pub use car::{Car, B2 as CarB2};
pub use clock::Clock;
pub use clock2qplus::Clock2QPlus;
pub use clockpro::ClockPro;
pub use crlfu::CrLfu;
pub use error::SpecError;
pub use fbr::Fbr;
pub use fifo::Fifo;
pub use fifomerge::{FifoMerge, Retain as FifoMergeRetain};
pub use gdsf::Gdsf;
pub use hyperbolic::Hyperbolic;
pub use learned::glcache::GlCache;
pub use learned::lrb::{Lrb, Objective as LrbObjective, Window as LrbWindow};
pub use learned::threelcache::ThreeLCache;
pub use learned::Training;
pub use lecar::LeCaR;
pub use lfu::{Aging, Lfu};
pub use lhd::Lhd;
pub use lirs::Lirs;
pub use lru::Lru;
pub use lruk::LruK;
pub use mq::{History as MqHistory, Mq};
pub use opt::Opt;
pub use qdlp::Qdlp;
pub use random::Random;
pub use randomlru::RandomLru;
pub use s3fifo::S3Fifo;
pub use s3fifod::S3FifoD;
pub use sieve::Sieve;
pub use size::Size;
pub use slru::Slru;
pub use spec::{groups, parse_list, Params, PolicyList, PolicySpec};
pub use srlru::SrLru;
pub use twoq::{Sizing as TwoQSizing, TwoQ};
pub use wtinylfu::{Frequency as WTinyLfuFrequency, WTinyLfu};

use hearth_core::Policy;
use param::Bound::{Exclusive, Inclusive, Unbounded};
use param::Param;

/// Builds a policy from its parameters. A spec's parameters are checked
/// against its row (`params`, `relation`) when it is parsed; the builder's
/// constructor keeps its own guards for callers in code, and never refuses
/// because of the capacity.
type Builder = fn(capacity: u64, p: &Params) -> Result<Box<dyn Policy>, SpecError>;

/// A check across parameters of one row (FBR's section shares add up to at
/// most 1), on the values with defaults filled in.
type Relation = fn(p: &Params) -> Result<(), SpecError>;

/// One registry row: every fact about a policy.
struct Entry {
    name: &'static str,
    /// The parameters it accepts, and their values.
    params: &'static [Param],
    relation: Option<Relation>,
    group: Group,
    /// One of [`FAMILIES`].
    family: &'static str,
    /// Whether it reads `Access::next_access` (its driver must supply each
    /// access's next use; a server cannot).
    offline: bool,
    /// One line for `hearth policies`.
    about: &'static str,
    build: Builder,
}

/// Which comparison group a policy is in (see [`spec`] for the groups).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    /// One Hearth started with: the textbook set and Belady's OPT, listed in
    /// this rank's order.
    Classic(u8),
    Modern,
    /// Trains a model while it runs (see [`learned`]).
    Learned,
}
use Group::{Classic, Learned, Modern};

/// Families of policies, for grouping results (one panel each in a crowded
/// miss-ratio plot), in the order they are best shown.
const RECENCY: &str = "Recency: LRU and kin";
const FREQUENCY: &str = "Frequency";
const FIFO_BASED: &str = "FIFO-based: quick demotion, lazy promotion";
const ADAPTIVE: &str = "Adaptive";
const LEARNED: &str = "Learned: models trained during the run";
const OFFLINE_BOUNDS: &str = "Offline bounds";
const FAMILIES: &[&str] = &[RECENCY, FREQUENCY, FIFO_BASED, ADAPTIVE, LEARNED, OFFLINE_BOUNDS];

/// Parameters several rows share.
const SMALL: Param = Param::number("small", Exclusive(0.0), Exclusive(1.0));
const GHOST: Param = Param::number("ghost", Inclusive(0.0), Unbounded);
const SAMPLES: Param = Param::whole("samples", 1, u32::MAX as u64);

const REGISTRY: &[Entry] = &[
    Entry { name: "lru", params: &[], group: Classic(1), family: RECENCY, offline: false, about: "least recently used", relation: None, build: |c, _| Ok(Box::new(Lru::new(c))) },
    Entry { name: "fifo", params: &[], group: Classic(2), family: RECENCY, offline: false, about: "first in, first out", relation: None, build: |c, _| Ok(Box::new(Fifo::new(c))) },
    Entry { name: "clock", params: &[Param::whole("bits", 1, 8)], group: Classic(3), family: RECENCY, offline: false, about: "CLOCK / second chance; bits=N gives an N-bit reference counter (default 1)", relation: None, build: |c, p| Ok(Box::new(Clock::new(c, p.get("bits", 1)?)?)) },
    Entry { name: "lfu", params: &[Param::word_or_whole("aging", &["none", "da"], 1)], group: Classic(4), family: FREQUENCY, offline: false, about: "least frequently used, FIFO among equals; aging=da (LFU-DA) or aging=N (halve counts every N requests)", relation: None, build: |c, p| Ok(Box::new(Lfu::new(c, p.get("aging", Aging::None)?))) },
    Entry { name: "slru", params: &[Param::whole("segments", 1, Slru::MAX_SEGMENTS as u64)], group: Classic(5), family: RECENCY, offline: false, about: "segmented LRU with equal byte segments (default segments=4)", relation: None, build: |c, p| Ok(Box::new(Slru::new(c, p.get("segments", 4)?)?)) },
    Entry { name: "arc", params: &[Param::word("step", &["byte", "size"])], group: Classic(7), family: ADAPTIVE, offline: false, about: "adaptive replacement cache (Megiddo & Modha), byte-sized ghosts; step=size moves p by item sizes instead of bytes", relation: None, build: |c, p| Ok(Box::new(Arc::new(c, p.get("step", ArcStep::Byte)?))) },
    Entry { name: "opt", params: &[], group: Classic(11), family: OFFLINE_BOUNDS, offline: true, about: "Belady's offline optimum: evict the item requested furthest in the future", relation: None, build: |c, _| Ok(Box::new(Opt::new(c))) },
    Entry { name: "lirs", params: &[Param::number("hir", Exclusive(0.0), Exclusive(1.0))], group: Classic(8), family: ADAPTIVE, offline: false, about: "LIRS (Jiang & Zhang) as libCacheSim sizes it; hir=fraction of capacity for resident HIR blocks (default 0.01)", relation: None, build: |c, p| Ok(Box::new(Lirs::with_hir_ratio(c, p.get("hir", 0.01)?)?)) },
    Entry { name: "2q", params: &[Param::number("kin", Exclusive(0.0), Exclusive(1.0)), Param::number("kout", Inclusive(0.0), Unbounded), Param::word("sizing", &["slots", "bytes"])], group: Classic(6), family: RECENCY, offline: false, about: "full 2Q (Johnson & Shasha): A1in FIFO of kin x capacity bytes (0.25), A1out ghosts kout x resident items (0.5), Am LRU; sizing=bytes bounds A1out at kout x capacity bytes and Am at (1 - kin) x capacity, as libCacheSim", relation: None, build: |c, p| Ok(Box::new(TwoQ::with_sizing(c, p.get("kin", 0.25)?, p.get("kout", 0.5)?, p.get("sizing", TwoQSizing::Slots)?)?)) },
    Entry { name: "mq", params: &[Param::whole("m", 1, 32), Param::number("qout", Inclusive(0.0), Unbounded), Param::word_or_whole("lifetime", &["auto"], 1), Param::word("history", &["entries", "bytes"])], group: Classic(10), family: FREQUENCY, offline: false, about: "Multi-Queue (Zhou et al.): m LRU queues by log2 reference count (8), history of qout x entries (4; history=bytes: qout x capacity bytes), lifetime=N requests or auto (peak reuse distance, default); libCacheSim's MQ is mq:lifetime=10000,history=bytes", relation: None, build: |c, p| Ok(Box::new(Mq::with_lifetime_spec(c, p.get("m", 8)?, p.get("qout", 4.0)?, &p.get("lifetime", String::from("auto"))?)?.with_history(p.get("history", MqHistory::Entries)?))) },
    Entry { name: "fbr", params: &[Param::number("new", Exclusive(0.0), Inclusive(1.0)), Param::number("old", Exclusive(0.0), Inclusive(1.0)), Param::whole("amax", 1, u32::MAX as u64), Param::whole("cmax", 2, Fbr::MAX_CMAX as u64)], group: Classic(9), family: FREQUENCY, offline: false, about: "frequency-based replacement (Robinson & Devarakonda): new/old section shares (0.25/0.25), count aging above mean amax (100), counts capped at cmax (1000)", relation: Some(|p| fbr_args(p).and_then(|(new, old, amax, cmax)| Fbr::check(new, old, amax, cmax))), build: |c, p| { let (new, old, amax, cmax) = fbr_args(p)?; Ok(Box::new(Fbr::new(c, new, old, amax, cmax)?)) } },
    Entry { name: "s3fifo", params: &[SMALL, GHOST, Param::whole("threshold", 0, u8::MAX as u64)], group: Modern, family: FIFO_BASED, offline: false, about: "S3-FIFO (Yang et al.): small FIFO of small x capacity (0.1), main 2-bit CLOCK FIFO, ghosts of ghost x capacity bytes (0.9); threshold small-queue hits promote (2)", relation: None, build: |c, p| Ok(Box::new(S3Fifo::new(c, p.get("small", 0.1)?, p.get("ghost", 0.9)?, p.get("threshold", 2)?)?)) },
    Entry { name: "sieve", params: &[], group: Modern, family: FIFO_BASED, offline: false, about: "SIEVE (Zhang et al.): FIFO with a visited bit; a hand from tail to head evicts the first unvisited item, survivors stay in place", relation: None, build: |c, _| Ok(Box::new(Sieve::new(c))) },
    Entry { name: "wtinylfu", params: &[Param::number("window", Inclusive(0.0), Exclusive(1.0)), Param::number("protected", Inclusive(0.0), Exclusive(1.0)), Param::word("freq", &["sketch", "exact"])], group: Modern, family: FREQUENCY, offline: false, about: "W-TinyLFU (Einziger et al.): LRU window of window x capacity (0.01), SLRU main with protected share (0.8), admission by frequency; freq=sketch (Caffeine's 4-bit count-min sketch with doorkeeper and halving, default) or exact (libCacheSim's counting)", relation: None, build: |c, p| Ok(Box::new(WTinyLfu::new(c, p.get("window", 0.01)?, p.get("protected", 0.8)?, p.get("freq", WTinyLfuFrequency::Sketch)?)?)) },
    Entry { name: "lfuda", params: &[Param::word("formula", &["paper", "additive"])], group: Modern, family: FREQUENCY, offline: false, about: "LFU with Dynamic Aging (Arlitt et al.): formula=paper (default) prioritises count + priority of the last victim, as lfu:aging=da; formula=additive is libCacheSim's LFUDA: each hit adds the lowest resident priority, new items enter at it + 1", relation: None, build: |c, p| Ok(Box::new(Lfu::new(c, match p.get("formula", String::from("paper"))?.as_str() { "paper" => Aging::Dynamic, "additive" => Aging::DynamicAdditive, other => return Err(SpecError::range("lfuda", format!("formula must be paper or additive, got {other:?}"))) }))) },
    Entry { name: "lruk", params: &[Param::whole("k", 1, u32::MAX as u64)], group: Modern, family: RECENCY, offline: false, about: "LRU-K (O'Neil et al.): evict the oldest K-th most recent request, items with fewer than K requests first (k=2)", relation: None, build: |c, p| Ok(Box::new(LruK::new(c, p.get("k", 2)?)?)) },
    Entry { name: "gdsf", params: &[], group: Modern, family: FREQUENCY, offline: false, about: "GreedyDual-Size-Frequency (Cherkasova): evict the lowest L + requests x 1e6 / size, L rising to each victim's priority", relation: None, build: |c, _| Ok(Box::new(Gdsf::new(c))) },
    Entry { name: "mru", params: &[], group: Modern, family: RECENCY, offline: false, about: "most recently used: evict the item requested last (for loops larger than the cache)", relation: None, build: |c, _| Ok(Box::new(Lru::mru(c))) },
    Entry { name: "qdlp", params: &[SMALL, GHOST, Param::whole("threshold", 0, u8::MAX as u64)], group: Modern, family: FIFO_BASED, offline: false, about: "QD-LP-FIFO (Yang et al.): probationary FIFO drained first, items hit threshold times (1) move to a 2-bit CLOCK main cache of (1 - small) x capacity (0.1), others become ghosts (ghost x capacity bytes, 0.9) that re-enter the main cache", relation: None, build: |c, p| Ok(Box::new(Qdlp::new(c, p.get("small", 0.1)?, p.get("ghost", 0.9)?, p.get("threshold", 1)?)?)) },
    Entry { name: "random", params: &[Param::seed()], group: Modern, family: RECENCY, offline: false, about: "random replacement: a uniformly drawn resident item, seeded Lehmer64 (seed=S, default libCacheSim's state) so runs repeat", relation: None, build: |c, p| Ok(Box::new(Random::new(c, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "hyperbolic", params: &[SAMPLES, Param::seed()], group: Modern, family: FREQUENCY, offline: false, about: "Hyperbolic caching (Blankstein et al.): evict the lowest requests / time-in-cache among samples random items (64), seeded (seed=S)", relation: None, build: |c, p| Ok(Box::new(Hyperbolic::new(c, p.get("samples", 64)?, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "car", params: &[Param::word("b2", &["bounded", "unbounded"])], group: Modern, family: ADAPTIVE, offline: false, about: "CAR (Bansal & Modha): ARC's adaptation over two CLOCKs with reference bits, byte-sized ghosts, as libCacheSim; b2=bounded (default) keeps ghosts and residents within 2 x capacity as the paper, b2=unbounded is libCacheSim's B2", relation: None, build: |c, p| Ok(Box::new(Car::new(c, p.get("b2", CarB2::Bounded)?))) },
    Entry { name: "lecar", params: &[Param::seed()], group: Modern, family: ADAPTIVE, offline: false, about: "LeCaR (Vietri et al.): LRU and LFU experts, the victim drawn by weights that regret-driven ghost hits adjust; seeded (seed=S), as libCacheSim", relation: None, build: |c, p| Ok(Box::new(LeCaR::new(c, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "clock2qplus", params: &[SMALL, GHOST, Param::whole("threshold", 0, u32::MAX as u64), Param::number("window", Inclusive(0.0), Unbounded)], group: Modern, family: FIFO_BASED, offline: false, about: "CLOCK-2Q+ (libCacheSim): small FIFO of small x capacity (0.1), 1-bit CLOCK main, ghosts of ghost x capacity bytes (0.9); FIFO hits count (threshold=1 promotes) only past a correlation window of window x the FIFO's bytes admitted after the item (0.5)", relation: None, build: |c, p| Ok(Box::new(Clock2QPlus::new(c, p.get("small", 0.1)?, p.get("ghost", 0.9)?, p.get("threshold", 1)?, p.get("window", 0.5)?)?)) },
    Entry { name: "beladysize", params: &[SAMPLES, Param::seed()], group: Modern, family: OFFLINE_BOUNDS, offline: true, about: "size-aware Belady, offline: evict the largest size x distance to next request among samples random items (128), seeded (seed=S); items never requested again are not kept", relation: None, build: |c, p| Ok(Box::new(BeladySize::new(c, p.get("samples", 128)?, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "clockpro", params: &[Param::number("cold", Inclusive(0.0), Inclusive(1.0))], group: Modern, family: ADAPTIVE, offline: false, about: "CLOCK-Pro (Jiang et al.): hot and cold items and non-resident cold ones in test periods, three hands each on its own kind (O(1) a request); the cold share adapts from cold x capacity (0.5)", relation: None, build: |c, p| Ok(Box::new(ClockPro::new(c, p.get("cold", 0.5)?)?)) },
    Entry { name: "lhd", params: &[Param::seed()], group: Modern, family: FREQUENCY, offline: false, about: "LHD (Beckmann et al.): evict the lowest hit density (hits per byte-request, learnt per class of hit ages every 2^20 requests) among 8 random and 8 recently admitted items, with explorers; seeded (seed=S), as libCacheSim", relation: None, build: |c, p| Ok(Box::new(Lhd::new(c, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "cacheus", params: &[Param::seed()], group: Modern, family: ADAPTIVE, offline: false, about: "Cacheus (Rodriguez et al.): regret-weighted choice between scan-resistant SR-LRU and churn-resistant CR-LFU victims, self-tuning learning rate; seeded (seed=S)", relation: None, build: |c, p| Ok(Box::new(Cacheus::new(c, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "randomtwo", params: &[Param::seed()], group: Modern, family: RECENCY, offline: false, about: "RandomTwo (libCacheSim): of two uniformly drawn residents, evict the one requested longer ago; seeded Lehmer64 (seed=S)", relation: None, build: |c, p| Ok(Box::new(RandomLru::two(c, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "randomlru", params: &[SAMPLES, Param::seed()], group: Modern, family: RECENCY, offline: false, about: "RandomLRU (libCacheSim): evict the least recently requested of samples uniformly drawn residents (16, libCacheSim's n-samples); seeded Lehmer64 (seed=S)", relation: None, build: |c, p| Ok(Box::new(RandomLru::new(c, p.get("samples", 16)?, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "lruprob", params: &[Param::number("prob", Exclusive(0.0), Inclusive(1.0)), Param::seed()], group: Modern, family: RECENCY, offline: false, about: "LRU-Prob (libCacheSim): LRU whose hits move an item to the front with probability prob (0.5, as a draw divisible by 1/prob truncated); seeded Lehmer64 (seed=S), as libCacheSim", relation: None, build: |c, p| Ok(Box::new(Lru::prob(c, p.get("prob", 0.5)?, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "size", params: &[], group: Modern, family: FREQUENCY, offline: false, about: "Size (libCacheSim): evict the largest resident item, equal sizes in libCacheSim's heap order", relation: None, build: |c, _| Ok(Box::new(Size::new(c))) },
    Entry { name: "srlru", params: &[], group: Modern, family: RECENCY, offline: false, about: "SR-LRU (libCacheSim's, Cacheus' scan-resistant expert): new items enter an LRU list SR, hit ones an LRU list R that demotes its overflow to SR, SR's overflow leaves for a history; items that left SR unhit grow SR when they return", relation: None, build: |c, _| Ok(Box::new(SrLru::new(c))) },
    Entry { name: "crlfu", params: &[], group: Modern, family: FREQUENCY, offline: false, about: "CR-LFU (libCacheSim's, Cacheus' churn-resistant expert): least frequently used, the newest arrival at the lowest count first, O(1)", relation: None, build: |c, _| Ok(Box::new(CrLfu::new(c))) },
    Entry { name: "fifomerge", params: &[Param::whole("exam", 1, FifoMerge::MAX_EXAM as u64), Param::whole("keep", 0, usize::MAX as u64), Param::word("retain", &["freq", "frequency", "recency"]), Param::seed()], group: Modern, family: FIFO_BASED, offline: false, about: "FIFO-Merge (libCacheSim's): a FIFO whose evictions examine exam items (100) at a time from where the last stopped and evict all but the keep + 1 (50) worth most; retain=freq (hits + a seeded tie-breaking draw, per byte; default) or recency, seed=S as libCacheSim", relation: Some(|p| fifomerge_window(p).and_then(|(exam, keep)| FifoMerge::check(exam, keep))), build: |c, p| { let (exam, keep) = fifomerge_window(p)?; Ok(Box::new(FifoMerge::new(c, exam, keep, p.get("retain", FifoMergeRetain::Frequency)?, p.get("seed", admission::DEFAULT_SEED)?)?)) } },
    Entry { name: "s3fifod", params: &[SMALL, Param::whole("threshold", 0, u8::MAX as u64)], group: Modern, family: FIFO_BASED, offline: false, about: "S3-FIFO-d (libCacheSim's): S3-FIFO whose small (small x capacity, 0.1) and main 2-bit CLOCK queues trade bytes by which one's recent victims are requested again; threshold small-queue hits promote (1)", relation: None, build: |c, p| Ok(Box::new(S3FifoD::new(c, p.get("small", 0.1)?, p.get("threshold", 1)?)?)) },
    Entry { name: "glcache", params: &[Param::whole("segment", GlCache::MIN_SEGMENT as u64, GlCache::MAX_SEGMENT as u64).counting("objects"), Param::number("rank", Exclusive(0.0), Inclusive(1.0)), Param::number("retrain", Exclusive(0.0), Unbounded).counting("cache sizes")], group: Learned, family: LEARNED, offline: false, about: "GL-Cache (Yang et al.): objects written in segments of segment objects (100); gradient-boosted trees learn segment utility from sampled segments, retrained after every retrain x capacity bytes evicted (1); eviction merges the lowest predicted segment with the next, keeping half their objects, re-ranked after rank of the segments (0.02); FIFO merges before the first model", relation: None, build: |c, p| Ok(Box::new(GlCache::new(c, p.get("segment", 100)?, p.get("rank", 0.02)?, p.get("retrain", 1.0)?)?)) },
    Entry { name: "lrb", params: &[Param::word_or_whole("window", &["auto"], 1), Param::whole("batch", Lrb::MIN_BATCH as u64, Lrb::MAX_BATCH as u64).counting("samples"), Param::word("objective", &["bytes", "objects"]), Param::seed()], group: Learned, family: LEARNED, offline: false, about: "LRB (Song et al.): gradient-boosted trees predict each object's next-request distance from its past gaps, trained every batch labelled samples (16384); evict the furthest of 64 sampled residents, or the LRU one once unrequested for the memory window (window=N requests, or auto: 4 x the requests to fill the cache); LRU before the first model; objective=bytes (libCacheSim's) or objects (x size); seeded (seed=S)", relation: None, build: |c, p| Ok(Box::new(Lrb::new(c, p.get("window", LrbWindow::Auto)?, p.get("batch", 16384)?, p.get("objective", LrbObjective::Bytes)?, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "3lcache", params: &[Param::whole("batch", Lrb::MIN_BATCH as u64, Lrb::MAX_BATCH as u64).counting("samples"), Param::word("objective", &["bytes", "objects"]), Param::seed()], group: Learned, family: LEARNED, offline: false, about: "3L-Cache (Zhou et al.): gradient-boosted trees predict each object's next request from its age, last 3 gaps, size and count, trained every batch sampled labels (16384); each round ranks new objects beyond a reserved share and the next 1% met by a hand from the LRU end (low-count ones past its first part), and evicts the half predicted furthest; LRU before the first model; objective=bytes (libCacheSim's) or objects (x size); seeded (seed=S)", relation: None, build: |c, p| Ok(Box::new(ThreeLCache::new(c, p.get("batch", 16384)?, p.get("objective", LrbObjective::Bytes)?, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    // registry: add policies above this line
];

/// FBR's `new`, `old`, `amax` and `cmax`, defaults filled in (its row's
/// relation and builder read them alike).
fn fbr_args(p: &Params) -> Result<(f64, f64, u32, u32), SpecError> {
    Ok((p.get("new", 0.25)?, p.get("old", 0.25)?, p.get("amax", 100)?, p.get("cmax", 1000)?))
}

/// FIFO-Merge's `exam` and `keep`, defaults filled in.
fn fifomerge_window(p: &Params) -> Result<(usize, usize), SpecError> {
    Ok((p.get("exam", 100)?, p.get("keep", 50)?))
}

/// Builds a policy of `capacity` bytes from a spec written in code, like
/// `"arc"` or `"lru+tinylfu"`; input from outside is parsed once into a
/// [`PolicySpec`] at the edge instead.
pub fn build(spec: &str, capacity: u64) -> Result<Box<dyn Policy>, SpecError> {
    Ok(spec.parse::<PolicySpec>()?.build(capacity))
}

/// Every registered policy name.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

/// `(name, description)` for help text: every policy, then every admission
/// policy as `+name` (composed after any policy, `lru+tinylfu`).
pub fn describe() -> Vec<(&'static str, &'static str)> {
    REGISTRY
        .iter()
        .map(|e| (e.name, e.about))
        .chain(admission::ADMISSIONERS.iter().map(|e| (e.plus, e.about)))
        .collect()
}

/// The families' names, in the order they are best shown.
pub fn families() -> Vec<&'static str> {
    FAMILIES.to_vec()
}

/// Every admission policy name (the part after `+` in a spec).
pub fn admission_names() -> Vec<&'static str> {
    admission::ADMISSIONERS.iter().map(|e| e.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::Access;

    #[test]
    fn warming_changes_no_decision() {
        let mut x = 11u64;
        let keys: Vec<u64> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 3000).min(x % 211 + 40)
            })
            .collect();
        for spec in names() {
            let (mut plain, mut warmed) = (build(spec, 500).unwrap(), build(spec, 500).unwrap());
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for (i, &key) in keys.iter().enumerate() {
                warmed.warm(keys[(i + 8) % keys.len()]);
                warmed.warm(u64::MAX - key); // never requested
                let access = Access { key, size: 1, vtime: i as u64, ..Access::default() };
                let hits = (plain.access(&access, &mut a), warmed.access(&access, &mut b));
                assert_eq!(hits.0, hits.1, "{spec}: request {i}");
            }
            assert_eq!(a, b, "{spec}: the evictions differ");
        }
    }

    fn specs(list: &str) -> Vec<String> {
        parse_list(list).unwrap().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn every_policy_has_a_known_family() {
        for row in REGISTRY {
            assert!(FAMILIES.contains(&row.family), "{}: family {:?}", row.name, row.family);
        }
        for family in FAMILIES {
            assert!(REGISTRY.iter().any(|row| row.family == *family), "{family} is empty");
        }
        assert_eq!("WTinyLFU:window=0.2+bloom".parse::<PolicySpec>().unwrap().family(), "Frequency");
    }

    #[test]
    fn groups_partition_the_registry() {
        let classic = specs("classic");
        let modern = specs("modern");
        let learned = specs("learned");
        assert_eq!(classic, ["lru", "fifo", "clock", "lfu", "slru", "2q", "arc", "lirs", "fbr", "mq", "opt"]);
        assert_eq!(learned, ["glcache", "lrb", "3lcache"]);
        assert_eq!(specs("ALL"), names());
        assert_eq!(classic.len() + modern.len() + learned.len(), names().len());
        assert!(modern.iter().all(|n| !classic.contains(n) && !learned.contains(n)));
        for n in
            ["s3fifo", "sieve", "wtinylfu", "lruk", "gdsf", "mru", "lfuda", "clock2qplus", "beladysize", "clockpro"]
        {
            assert!(modern.iter().any(|m| m == n), "{n} is modern");
        }
        let err = "all".parse::<PolicySpec>().unwrap_err().to_string();
        assert_eq!(err, format!("\"all\" names {} policies where one is expected", names().len()));
    }

    #[test]
    fn admission_composes_with_every_policy() {
        for n in names() {
            for a in admission_names() {
                let spec = format!("{n}+{a}");
                let p = build(&spec, 1 << 20).unwrap_or_else(|e| panic!("{spec}: {e}"));
                assert!(p.name().ends_with(&format!("+{a}")), "{spec}");
            }
        }
        let offline = |spec: &str| spec.parse::<PolicySpec>().unwrap().is_offline();
        assert!(offline("opt+tinylfu") && offline("OPT") && offline("beladysize:samples=8"));
        assert!(!offline("lru+prob:p=0.5"));
        assert_eq!(specs("lru, arc+prob:p=0.5, seed=1"), ["lru", "arc+prob:p=0.5,seed=1"]);
        let names: Vec<&str> = describe().into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&"+tinylfu") && names.contains(&"+adaptsize"));
    }

    #[test]
    fn comma_split_specs_keep_their_parameters() {
        assert_eq!(
            specs("lru,mq:m=8,lifetime=5000,lfu:aging=10,arc"),
            ["lru", "mq:m=8,lifetime=5000", "lfu:aging=10", "arc"]
        );
        assert_eq!(specs("mq:m=8, lifetime=5+prob:p=0.5, seed=3"), ["mq:m=8,lifetime=5+prob:p=0.5,seed=3"]);
        // A stray key=value with no spec before it stays a (bad) spec of its own.
        assert_eq!(
            parse_list("m=8").unwrap_err().to_string(),
            format!("unknown policy \"m=8\" (known: {})", names().join(", "))
        );
        assert!(parse_list("lru+tinylfu,p=1").is_err(), "a part without ':' takes no more parameters");
    }

    #[test]
    fn specs_round_trip_through_display() {
        for text in ["lru", "mq:m=8,lifetime=5000", "2q:kin=0.25+prob:p=0.3,seed=7", "wtinylfu+tinylfu", "lfu:aging=da"]
        {
            let spec: PolicySpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), text);
            assert_eq!(spec.to_string().parse::<PolicySpec>().unwrap(), spec);
        }
        let spec: PolicySpec = " MQ : m = 8 + Bloom".parse().unwrap();
        assert_eq!(spec.to_string(), "mq:m=8+tinylfu");
    }

    #[test]
    fn parameter_errors_name_the_policy() {
        let err = |spec: &str| spec.parse::<PolicySpec>().err().unwrap().to_string();
        assert_eq!(err("lru:foo=1"), "policy lru takes no parameters (got \"foo\")");
        assert!(err("mq:m=abc").starts_with("mq: bad value \"abc\" for parameter \"m\""), "{}", err("mq:m=abc"));
        assert!(err("mq:mm=3").contains("policy mq has no parameter \"mm\" (known: m, qout, lifetime, history)"));
        assert!(err("lru+prob:p=x").starts_with("+prob: bad value"), "{}", err("lru+prob:p=x"));
        assert_eq!(err("clock:bits=9"), "clock: bits must be between 1 and 8, got 9");
        assert_eq!(
            err("lru+nope"),
            "unknown admission policy \"nope\" (known: tinylfu, size, prob, sizeprob, adaptsize)"
        );
        assert_eq!(err("mq:m"), "policy parameter \"m\" is not key=value");
        assert_eq!(err("lru,arc"), "\"lru,arc\" names 2 policies where one is expected");
    }

    #[test]
    fn labels_tell_parameterised_specs_apart() {
        let label_of = |text: &str| {
            let spec: PolicySpec = text.parse().unwrap();
            spec.label(&spec.build(1 << 20).name())
        };
        assert_eq!(label_of("mq"), "MQ");
        assert_eq!(label_of("mq:m=4,lifetime=100"), "MQ:m=4,lifetime=100");
        assert_eq!(label_of("lru+tinylfu"), "LRU+tinylfu");
        assert_eq!(label_of("2q:kin=0.25+prob:p=0.3"), "2Q:kin=0.25+prob:p=0.3");
        // The eviction name's own '+' is not taken for an admission policy's.
        assert_eq!(label_of("clock2qplus:small=0.2"), "CLOCK-2Q+:small=0.2");
        assert_eq!(label_of("clock2qplus+bloom"), "CLOCK-2Q++tinylfu");
    }
}

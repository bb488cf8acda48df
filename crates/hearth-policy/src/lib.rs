//! Replacement policies, one file each, and a registry that builds them from
//! a spec string such as `"lru"`, `"lfu:aging=10000"` or `"mq:m=8"`.
//!
//! Adding a policy: one new file implementing `hearth_core::Policy`, one
//! `mod` line and one line in `REGISTRY`.

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

pub mod admission;
mod arc;
mod beladysize;
mod cacheus;
mod car;
mod clock;
mod clock2qplus;
mod clockpro;
mod error;
mod fbr;
mod fifo;
mod gdsf;
mod hyperbolic;
mod lecar;
mod lfu;
mod lhd;
mod lirs;
mod lru;
mod lruk;
mod mq;
mod opt;
mod qdlp;
mod random;
mod s3fifo;
mod sieve;
mod slru;
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
pub use error::SpecError;
pub use fbr::Fbr;
pub use fifo::Fifo;
pub use gdsf::Gdsf;
pub use hyperbolic::Hyperbolic;
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
pub use s3fifo::S3Fifo;
pub use sieve::Sieve;
pub use slru::Slru;
pub use twoq::{Sizing as TwoQSizing, TwoQ};
pub use wtinylfu::{Frequency as WTinyLfuFrequency, WTinyLfu};

use hearth_core::Policy;

/// Parameters parsed from a spec's `name:key=value,key=value` tail.
#[derive(Debug, Default, Clone)]
pub struct Params {
    /// The policy (or admissioner) they belong to, for messages.
    owner: String,
    pairs: Vec<(String, String)>,
}

impl Params {
    /// The value of `key` parsed as `T`, or `default` if absent.
    pub fn get<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, SpecError> {
        match self.pairs.iter().find(|(k, _)| k == key) {
            None => Ok(default),
            Some((_, v)) => v.parse().map_err(|_| SpecError::BadValue {
                owner: self.owner.clone(),
                key: key.to_string(),
                value: v.clone(),
            }),
        }
    }
    /// Parses the `key=value,key=value` tail of `owner`'s spec.
    fn parse(owner: &str, rest: &str) -> Result<Self, SpecError> {
        let mut params = Params { owner: owner.to_string(), pairs: Vec::new() };
        for kv in rest.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| SpecError::NotKeyValue { piece: kv.to_string() })?;
            params.pairs.push((k.trim().to_string(), v.trim().to_string()));
        }
        Ok(params)
    }
    fn check_known(&self, policy: &str, known: &[&str]) -> Result<(), SpecError> {
        for (k, _) in &self.pairs {
            if known.is_empty() {
                return Err(SpecError::TakesNoParameters { policy: policy.to_string(), key: k.clone() });
            }
            if !known.contains(&k.as_str()) {
                return Err(SpecError::UnknownParameter {
                    policy: policy.to_string(),
                    key: k.clone(),
                    known: known.join(", "),
                });
            }
        }
        Ok(())
    }
}

type Builder = fn(capacity: u64, p: &Params) -> Result<Box<dyn Policy>, SpecError>;

/// One registry row: name, accepted parameters, one-line description, builder.
struct Entry {
    name: &'static str,
    params: &'static [&'static str],
    about: &'static str,
    build: Builder,
}

const REGISTRY: &[Entry] = &[
    Entry { name: "lru", params: &[], about: "least recently used", build: |c, _| Ok(Box::new(Lru::new(c))) },
    Entry { name: "fifo", params: &[], about: "first in, first out", build: |c, _| Ok(Box::new(Fifo::new(c))) },
    Entry { name: "clock", params: &["bits"], about: "CLOCK / second chance; bits=N gives an N-bit reference counter (default 1)", build: |c, p| Ok(Box::new(Clock::new(c, p.get("bits", 1)?)?)) },
    Entry { name: "lfu", params: &["aging"], about: "least frequently used, FIFO among equals; aging=da (LFU-DA) or aging=N (halve counts every N requests)", build: |c, p| Ok(Box::new(Lfu::new(c, p.get("aging", Aging::None)?))) },
    Entry { name: "slru", params: &["segments"], about: "segmented LRU with equal byte segments (default segments=4)", build: |c, p| Ok(Box::new(Slru::new(c, p.get("segments", 4)?)?)) },
    Entry { name: "arc", params: &["step"], about: "adaptive replacement cache (Megiddo & Modha), byte-sized ghosts; step=size moves p by item sizes instead of bytes", build: |c, p| Ok(Box::new(Arc::new(c, p.get("step", ArcStep::Byte)?))) },
    Entry { name: "opt", params: &[], about: "Belady's offline optimum: evict the item requested furthest in the future", build: |c, _| Ok(Box::new(Opt::new(c))) },
    Entry { name: "lirs", params: &["hir"], about: "LIRS (Jiang & Zhang) as libCacheSim sizes it; hir=fraction of capacity for resident HIR blocks (default 0.01)", build: |c, p| Ok(Box::new(Lirs::with_hir_ratio(c, p.get("hir", 0.01)?)?)) },
    Entry { name: "2q", params: &["kin", "kout", "sizing"], about: "full 2Q (Johnson & Shasha): A1in FIFO of kin x capacity bytes (0.25), A1out ghosts kout x resident items (0.5), Am LRU; sizing=bytes bounds A1out at kout x capacity bytes and Am at (1 - kin) x capacity, as libCacheSim", build: |c, p| Ok(Box::new(TwoQ::with_sizing(c, p.get("kin", 0.25)?, p.get("kout", 0.5)?, p.get("sizing", TwoQSizing::Slots)?)?)) },
    Entry { name: "mq", params: &["m", "qout", "lifetime", "history"], about: "Multi-Queue (Zhou et al.): m LRU queues by log2 reference count (8), history of qout x entries (4; history=bytes: qout x capacity bytes), lifetime=N requests or auto (peak reuse distance, default); libCacheSim's MQ is mq:lifetime=10000,history=bytes", build: |c, p| Ok(Box::new(Mq::with_lifetime_spec(c, p.get("m", 8)?, p.get("qout", 4.0)?, &p.get("lifetime", String::from("auto"))?)?.with_history(p.get("history", MqHistory::Entries)?))) },
    Entry { name: "fbr", params: &["new", "old", "amax", "cmax"], about: "frequency-based replacement (Robinson & Devarakonda): new/old section shares (0.25/0.25), count aging above mean amax (100), counts capped at cmax (1000)", build: |c, p| Ok(Box::new(Fbr::new(c, p.get("new", 0.25)?, p.get("old", 0.25)?, p.get("amax", 100)?, p.get("cmax", 1000)?)?)) },
    Entry { name: "s3fifo", params: &["small", "ghost", "threshold"], about: "S3-FIFO (Yang et al.): small FIFO of small x capacity (0.1), main 2-bit CLOCK FIFO, ghosts of ghost x capacity bytes (0.9); threshold small-queue hits promote (2)", build: |c, p| Ok(Box::new(S3Fifo::new(c, p.get("small", 0.1)?, p.get("ghost", 0.9)?, p.get("threshold", 2)?)?)) },
    Entry { name: "sieve", params: &[], about: "SIEVE (Zhang et al.): FIFO with a visited bit; a hand from tail to head evicts the first unvisited item, survivors stay in place", build: |c, _| Ok(Box::new(Sieve::new(c))) },
    Entry { name: "wtinylfu", params: &["window", "protected", "freq"], about: "W-TinyLFU (Einziger et al.): LRU window of window x capacity (0.01), SLRU main with protected share (0.8), admission by frequency; freq=sketch (Caffeine's 4-bit count-min sketch with doorkeeper and halving, default) or exact (libCacheSim's counting)", build: |c, p| Ok(Box::new(WTinyLfu::new(c, p.get("window", 0.01)?, p.get("protected", 0.8)?, p.get("freq", WTinyLfuFrequency::Sketch)?)?)) },
    Entry { name: "lfuda", params: &["formula"], about: "LFU with Dynamic Aging (Arlitt et al.): formula=paper (default) prioritises count + priority of the last victim, as lfu:aging=da; formula=additive is libCacheSim's LFUDA: each hit adds the lowest resident priority, new items enter at it + 1", build: |c, p| Ok(Box::new(Lfu::new(c, match p.get("formula", String::from("paper"))?.as_str() { "paper" => Aging::Dynamic, "additive" => Aging::DynamicAdditive, other => return Err(SpecError::range("lfuda", format!("formula must be paper or additive, got {other:?}"))) }))) },
    Entry { name: "lruk", params: &["k"], about: "LRU-K (O'Neil et al.): evict the oldest K-th most recent request, items with fewer than K requests first (k=2)", build: |c, p| Ok(Box::new(LruK::new(c, p.get("k", 2)?)?)) },
    Entry { name: "gdsf", params: &[], about: "GreedyDual-Size-Frequency (Cherkasova): evict the lowest L + requests x 1e6 / size, L rising to each victim's priority", build: |c, _| Ok(Box::new(Gdsf::new(c))) },
    Entry { name: "mru", params: &[], about: "most recently used: evict the item requested last (for loops larger than the cache)", build: |c, _| Ok(Box::new(Lru::mru(c))) },
    Entry { name: "qdlp", params: &["small", "ghost", "threshold"], about: "QD-LP-FIFO (Yang et al.): probationary FIFO drained first, items hit threshold times (1) move to a 2-bit CLOCK main cache of (1 - small) x capacity (0.1), others become ghosts (ghost x capacity bytes, 0.9) that re-enter the main cache", build: |c, p| Ok(Box::new(Qdlp::new(c, p.get("small", 0.1)?, p.get("ghost", 0.9)?, p.get("threshold", 1)?)?)) },
    Entry { name: "random", params: &["seed"], about: "random replacement: a uniformly drawn resident item, seeded Lehmer64 (seed=S, default libCacheSim's state) so runs repeat", build: |c, p| Ok(Box::new(Random::new(c, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "hyperbolic", params: &["samples", "seed"], about: "Hyperbolic caching (Blankstein et al.): evict the lowest requests / time-in-cache among samples random items (64), seeded (seed=S)", build: |c, p| Ok(Box::new(Hyperbolic::new(c, p.get("samples", 64)?, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "car", params: &["b2"], about: "CAR (Bansal & Modha): ARC's adaptation over two CLOCKs with reference bits, byte-sized ghosts, as libCacheSim; b2=bounded (default) keeps ghosts and residents within 2 x capacity as the paper, b2=unbounded is libCacheSim's B2", build: |c, p| Ok(Box::new(Car::new(c, p.get("b2", CarB2::Bounded)?))) },
    Entry { name: "lecar", params: &["seed"], about: "LeCaR (Vietri et al.): LRU and LFU experts, the victim drawn by weights that regret-driven ghost hits adjust; seeded (seed=S), as libCacheSim", build: |c, p| Ok(Box::new(LeCaR::new(c, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "clock2qplus", params: &["small", "ghost", "threshold", "window"], about: "CLOCK-2Q+ (libCacheSim): small FIFO of small x capacity (0.1), 1-bit CLOCK main, ghosts of ghost x capacity bytes (0.9); FIFO hits count (threshold=1 promotes) only past a correlation window of window x the FIFO's bytes admitted after the item (0.5)", build: |c, p| Ok(Box::new(Clock2QPlus::new(c, p.get("small", 0.1)?, p.get("ghost", 0.9)?, p.get("threshold", 1)?, p.get("window", 0.5)?)?)) },
    Entry { name: "beladysize", params: &["samples", "seed"], about: "size-aware Belady, offline: evict the largest size x distance to next request among samples random items (128), seeded (seed=S); items never requested again are not kept", build: |c, p| Ok(Box::new(BeladySize::new(c, p.get("samples", 128)?, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "clockpro", params: &["cold"], about: "CLOCK-Pro (Jiang et al.): hot and cold items and non-resident cold ones in test periods, three hands each on its own kind (O(1) a request); the cold share adapts from cold x capacity (0.5)", build: |c, p| Ok(Box::new(ClockPro::new(c, p.get("cold", 0.5)?)?)) },
    Entry { name: "lhd", params: &["seed"], about: "LHD (Beckmann et al.): evict the lowest hit density (hits per byte-request, learnt per class of hit ages every 2^20 requests) among 8 random and 8 recently admitted items, with explorers; seeded (seed=S), as libCacheSim", build: |c, p| Ok(Box::new(Lhd::new(c, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    Entry { name: "cacheus", params: &["seed"], about: "Cacheus (Rodriguez et al.): regret-weighted choice between scan-resistant SR-LRU and churn-resistant CR-LFU victims, self-tuning learning rate; seeded (seed=S)", build: |c, p| Ok(Box::new(Cacheus::new(c, p.get("seed", admission::DEFAULT_SEED)?)?)) },
    // registry: add policies above this line
];

/// Builds a policy of `capacity` bytes from a spec like `"arc"` or `"mq:m=8"`,
/// optionally behind an admission policy: `"lru+tinylfu"`,
/// `"arc+prob:p=0.5,seed=1"` (see [`admission`](crate::admission)).
pub fn build(spec: &str, capacity: u64) -> Result<Box<dyn Policy>, SpecError> {
    match spec.split_once('+') {
        Some((eviction, admission)) => admission::wrap(build_eviction(eviction, capacity)?, admission),
        None => build_eviction(spec, capacity),
    }
}

fn build_eviction(spec: &str, capacity: u64) -> Result<Box<dyn Policy>, SpecError> {
    let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
    let name = name.trim().to_ascii_lowercase();
    let entry = REGISTRY
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| SpecError::UnknownPolicy { name: name.clone(), known: names().join(", ") })?;
    let params = Params::parse(entry.name, rest)?;
    params.check_known(entry.name, entry.params)?;
    (entry.build)(capacity, &params)
}

/// How a result row names the policy built from `spec` (whose `name()` is
/// `name`): the name, with the parameters the spec gives after the part they
/// belong to, so `mq` and `mq:m=4` are told apart (`MQ`, `MQ:m=4`,
/// `LRU+prob:p=0.3`).
pub fn label(spec: &str, name: &str) -> String {
    let params = |part: &str| part.split_once(':').map(|(_, p)| p.trim().to_string()).filter(|p| !p.is_empty());
    let (eviction, admission) = spec.split_once('+').map_or((spec, None), |(e, a)| (e, Some(a)));
    let (evicts, admits) = name.split_once('+').map_or((name, None), |(e, a)| (e, Some(a)));
    let mut out = evicts.to_string();
    if let Some(p) = params(eviction) {
        out = format!("{out}:{p}");
    }
    if let Some(a) = admits {
        out = format!("{out}+{a}");
        if let Some(p) = admission.and_then(params) {
            out = format!("{out}:{p}");
        }
    }
    out
}

/// Rejoins a comma-split list of specs: a piece with `=` but no `:` is one
/// more parameter of the spec before it, so `lru,mq:m=8,lifetime=5000` is the
/// two specs `lru` and `mq:m=8,lifetime=5000`.
pub fn join_specs(pieces: &[String]) -> Vec<String> {
    let mut specs: Vec<String> = Vec::with_capacity(pieces.len());
    for piece in pieces {
        match specs.last_mut() {
            Some(spec) if piece.contains('=') && !piece.contains(':') && spec.contains(':') => {
                spec.push(',');
                spec.push_str(piece);
            }
            _ => specs.push(piece.clone()),
        }
    }
    specs
}

/// Policies that read `Access::next_access`.
const OFFLINE: &[&str] = &["opt", "beladysize"];

/// Whether the policy `spec` names reads `Access::next_access` (OPT,
/// BeladySize), so its driver must supply each access's next use.
pub fn is_offline(spec: &str) -> bool {
    let eviction = spec.split_once('+').map_or(spec, |(eviction, _)| eviction);
    let name = eviction.split_once(':').map_or(eviction, |(name, _)| name);
    OFFLINE.iter().any(|offline| name.trim().eq_ignore_ascii_case(offline))
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

/// The policies Hearth started with: the textbook set and Belady's OPT.
const CLASSIC: &[&str] = &["lru", "fifo", "clock", "lfu", "slru", "2q", "arc", "lirs", "fbr", "mq", "opt"];

/// Policy names of a comparison group: `classic` (LRU … MQ, then OPT),
/// `modern` (every other registered policy, in registry order: S3-FIFO,
/// SIEVE, W-TinyLFU, …) or `all` (registry order); `None` for another name.
pub fn group(name: &str) -> Option<Vec<&'static str>> {
    let classic = |n: &&'static str| CLASSIC.contains(n);
    let all = names();
    match name.trim().to_ascii_lowercase().as_str() {
        "classic" => Some(CLASSIC.iter().copied().filter(|n| all.contains(n)).collect()),
        "modern" => Some(all.into_iter().filter(|n| !classic(n)).collect()),
        "all" => Some(all),
        _ => None,
    }
}

/// Families of registered policies, for grouping results (one panel each
/// in a crowded miss-ratio plot); every policy is in exactly one.
const FAMILIES: &[(&str, &[&str])] = &[
    ("Recency: LRU and kin", &["lru", "fifo", "clock", "slru", "2q", "lruk", "mru", "random"]),
    ("Frequency", &["lfu", "lfuda", "fbr", "mq", "gdsf", "hyperbolic", "lhd", "wtinylfu"]),
    ("FIFO-based: quick demotion, lazy promotion", &["s3fifo", "sieve", "qdlp", "clock2qplus"]),
    ("Adaptive", &["arc", "car", "lirs", "clockpro", "lecar", "cacheus"]),
    ("Offline bounds", &["opt", "beladysize"]),
];

/// The family of a policy spec (that of its eviction policy for
/// `wtinylfu:window=0.2+bloom`); None for an unknown policy.
pub fn family(spec: &str) -> Option<&'static str> {
    let eviction = spec.split_once('+').map_or(spec, |(eviction, _)| eviction);
    let name = eviction.split_once(':').map_or(eviction, |(name, _)| name).trim().to_ascii_lowercase();
    FAMILIES.iter().find(|(_, members)| members.contains(&name.as_str())).map(|&(family, _)| family)
}

/// The families' names, in the order they are best shown.
pub fn families() -> Vec<&'static str> {
    FAMILIES.iter().map(|&(family, _)| family).collect()
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

    #[test]
    fn families_partition_the_registry() {
        let mut members: Vec<&str> = FAMILIES.iter().flat_map(|(_, m)| m.iter().copied()).collect();
        members.sort_unstable();
        let mut all = names();
        all.sort_unstable();
        assert_eq!(members, all, "every policy in exactly one family");
        assert_eq!(family("WTinyLFU:window=0.2+bloom"), Some("Frequency"));
        assert_eq!(family("nope"), None);
    }

    #[test]
    fn groups_partition_the_registry() {
        let classic = group("classic").unwrap();
        let modern = group("modern").unwrap();
        let all = group("ALL").unwrap();
        assert_eq!(classic, CLASSIC, "every classic policy is registered");
        assert_eq!(all, names());
        assert_eq!(classic.len() + modern.len(), all.len());
        assert!(modern.iter().all(|n| !classic.contains(n)));
        for n in
            ["s3fifo", "sieve", "wtinylfu", "lruk", "gdsf", "mru", "lfuda", "clock2qplus", "beladysize", "clockpro"]
        {
            assert!(modern.contains(&n), "{n} is modern");
        }
        assert_eq!(group("nope"), None);
        for n in all {
            build(n, 1 << 20).unwrap();
        }
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
        assert!(is_offline("opt+tinylfu") && is_offline("OPT") && is_offline("beladysize:samples=8"));
        assert!(!is_offline("lru+prob:p=0.5"));
        let pieces: Vec<String> = ["lru", "arc+prob:p=0.5", "seed=1"].iter().map(|s| s.to_string()).collect();
        assert_eq!(join_specs(&pieces), vec!["lru", "arc+prob:p=0.5,seed=1"]);
        let names: Vec<&str> = describe().into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&"+tinylfu") && names.contains(&"+adaptsize"));
    }

    #[test]
    fn comma_split_specs_keep_their_parameters() {
        let pieces: Vec<String> =
            ["lru", "mq:m=8", "lifetime=5000", "lfu:aging=10", "arc"].iter().map(|s| s.to_string()).collect();
        assert_eq!(join_specs(&pieces), vec!["lru", "mq:m=8,lifetime=5000", "lfu:aging=10", "arc"]);
        for spec in join_specs(&pieces) {
            build(&spec, 1 << 20).unwrap();
        }
        // A stray key=value with no spec before it stays a (bad) spec of its own.
        assert_eq!(join_specs(&["m=8".to_string()]), vec!["m=8"]);
    }

    #[test]
    fn parameter_errors_name_the_policy() {
        let err = |spec: &str| build(spec, 1 << 20).err().unwrap().to_string();
        assert_eq!(err("lru:foo=1"), "policy lru takes no parameters (got \"foo\")");
        assert!(err("mq:m=abc").starts_with("mq: bad value \"abc\" for parameter \"m\""), "{}", err("mq:m=abc"));
        assert!(err("mq:mm=3").contains("policy mq has no parameter \"mm\" (known: m, qout, lifetime, history)"));
        assert!(err("lru+prob:p=x").starts_with("+prob: bad value"), "{}", err("lru+prob:p=x"));
    }

    #[test]
    fn labels_tell_parameterised_specs_apart() {
        let label_of = |spec: &str| label(spec, &build(spec, 1 << 20).unwrap().name());
        assert_eq!(label_of("mq"), "MQ");
        assert_eq!(label_of("mq:m=4,lifetime=100"), "MQ:m=4,lifetime=100");
        assert_eq!(label_of("lru+tinylfu"), "LRU+tinylfu");
        assert_eq!(label_of("2q:kin=0.25+prob:p=0.3"), "2Q:kin=0.25+prob:p=0.3");
    }
}

//! Admission policies, composable with any eviction policy as a spec suffix:
//! `lru+tinylfu`, `s3fifo+size:max=1MiB`, `arc+prob:p=0.5,seed=1`,
//! `lru+adaptsize`. They follow libCacheSim's admissioners
//! (`cache/admission/*.c`, the `admissioner=` argument of the `libcachesim`
//! Python package):
//!
//! - `tinylfu` (also `bloom`): one-hit-wonder rejection, libCacheSim's
//!   `BloomFilter`: an object is admitted from its second miss on. Like
//!   libCacheSim it remembers every object it has seen exactly (a hash set,
//!   never aged), so there are no false positives;
//! - `size:max=BYTES`: admit objects strictly smaller than `max` (`Size`);
//! - `prob:p=P,seed=S`: admit with probability `p` (`Prob`, default 0.5);
//! - `sizeprob:exponent=E,seed=S`: admit with probability `e^(-E x size)`
//!   (`SizeProbabilistic`, default 1e-6);
//! - `adaptsize:iterations=N,interval=R,seed=S`: AdaptSize (Berger et al.,
//!   NSDI'17): admit with probability `e^(-size/c)`, `c` re-tuned every `R`
//!   requests (30000) by golden-section search (`N` = 15 steps) over the
//!   paper's Markov model of the hit ratio (`AdaptSize`).
//!
//! The random ones draw from libCacheSim's generator (Lehmer64, `next_rand`),
//! whose state libCacheSim starts at 0xdeadbeef; `seed` sets that state, so
//! the default reproduces a fresh libCacheSim process and every run with the
//! same seed is the same. As in libCacheSim, the admissioner is consulted on
//! every miss, before the object-too-large check, and a rejected object is a
//! miss that is not inserted. AdaptSize's statistics see every request (the
//! lookup), hits included.

use hearth_core::{key_map, Access, Key, KeyMap, Policy};

use crate::param::Bound::{Exclusive, Inclusive};
use crate::param::Param;
use crate::Params;
use crate::SpecError;

/// libCacheSim's `g_lehmer64_state` before anyone seeds it.
pub const DEFAULT_SEED: u64 = 0xdead_beef;
/// libCacheSim's probabilities are drawn as `next_rand() % MAX_MODULE`.
const MAX_MODULE: u64 = 10_000_000;

/// libCacheSim's `next_rand`: a 128-bit Lehmer generator returning the high
/// 64 bits.
#[derive(Clone, Debug)]
pub struct Lehmer64(u128);

impl Lehmer64 {
    pub fn new(seed: u64) -> Self {
        Lehmer64(u128::from(seed))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(0xda94_2042_e4dd_58b5);
        (self.0 >> 64) as u64
    }
    /// `(next_rand() % MAX_MODULE) / MAX_MODULE`, libCacheSim's roll in [0, 1).
    fn roll(&mut self) -> f64 {
        (self.next_u64() % MAX_MODULE) as f64 / MAX_MODULE as f64
    }
}

/// Registry row of an admissioner: name, aliases, parameters, description.
pub(crate) struct AdmitEntry {
    pub name: &'static str,
    /// `+name`, as `hearth policies` lists it.
    pub plus: &'static str,
    pub aliases: &'static [&'static str],
    pub params: &'static [Param],
    pub about: &'static str,
}

pub(crate) const ADMISSIONERS: &[AdmitEntry] = &[
    AdmitEntry { name: "tinylfu", plus: "+tinylfu", aliases: &["bloom", "bloomfilter"], params: &[], about: "admission (lru+tinylfu, alias +bloom): one-hit-wonder rejection, admit an object from its second miss on (libCacheSim's BloomFilter: exact, never aged)" },
    AdmitEntry { name: "size", plus: "+size", aliases: &[], params: &[Param::bytes("max")], about: "admission (lru+size:max=1MiB): admit objects smaller than max (libCacheSim's Size)" },
    AdmitEntry { name: "prob", plus: "+prob", aliases: &[], params: &[Param::number("p", Exclusive(0.0), Inclusive(1.0)), Param::seed()], about: "admission (lru+prob:p=0.5,seed=S): admit with probability p, seeded Lehmer64 as libCacheSim's Prob" },
    AdmitEntry { name: "sizeprob", plus: "+sizeprob", aliases: &[], params: &[Param::number("exponent", Exclusive(0.0), Inclusive(1.0)), Param::seed()], about: "admission (lru+sizeprob:exponent=1e-6,seed=S): admit with probability e^(-exponent x size) (libCacheSim's SizeProbabilistic)" },
    AdmitEntry { name: "adaptsize", plus: "+adaptsize", aliases: &[], params: &[Param::whole("iterations", 0, u64::MAX), Param::whole("interval", 1, u64::MAX), Param::seed()], about: "admission (lru+adaptsize:iterations=15,interval=30000,seed=S): AdaptSize (Berger et al.), admit with probability e^(-size/c), c tuned by its hit-ratio model" },
];

/// The decision of one admission policy.
enum Admission {
    Seen(KeyMap<()>),
    Size { max: u64 },
    Prob { threshold: u64, rng: Lehmer64 },
    SizeProb { exponent: f64, rng: Lehmer64 },
    AdaptSize(Box<AdaptSize>),
}

impl Admission {
    fn build(entry: &AdmitEntry, p: &Params) -> Result<Self, SpecError> {
        let seed = || -> Result<Lehmer64, SpecError> {
            let seed: u64 = p.get("seed", DEFAULT_SEED)?;
            if seed == 0 {
                return Err(SpecError::range("admission", "seed must not be 0 (the generator would stay at 0)"));
            }
            Ok(Lehmer64::new(seed))
        };
        let adm = match entry.name {
            "tinylfu" => Admission::Seen(key_map(1024)),
            "size" => {
                let max = p.get("max", String::new())?;
                let max = if max.is_empty() {
                    u64::MAX
                } else {
                    hearth_core::parse_bytes(&max).map_err(|error| SpecError::BadSize {
                        owner: "+size".into(),
                        key: "max",
                        error,
                    })?
                };
                Admission::Size { max }
            }
            "prob" => {
                let prob: f64 = p.get("p", 0.5)?;
                if !(prob > 0.0 && prob <= 1.0) {
                    return Err(SpecError::range("prob", format!("p must be in (0, 1], not {prob}")));
                }
                // libCacheSim: (int)(p * MAX_MODULE), compared with next_rand() % MAX_MODULE.
                Admission::Prob { threshold: (prob * MAX_MODULE as f64) as u64, rng: seed()? }
            }
            "sizeprob" => {
                let exponent: f64 = p.get("exponent", 1e-6)?;
                if !(exponent > 0.0 && exponent <= 1.0) {
                    return Err(SpecError::range("sizeprob", format!("exponent must be in (0, 1], not {exponent}")));
                }
                Admission::SizeProb { exponent, rng: seed()? }
            }
            "adaptsize" => {
                let iterations: u64 = p.get("iterations", 15)?;
                let interval: u64 = p.get("interval", 30000)?;
                if interval == 0 {
                    return Err(SpecError::range("adaptsize", "interval must be at least 1"));
                }
                Admission::AdaptSize(Box::new(AdaptSize::new(iterations, interval, seed()?)))
            }
            _ => unreachable!("every ADMISSIONERS row is built above"),
        };
        Ok(adm)
    }

    /// Sees every request (libCacheSim's `admissioner->update`).
    fn update(&mut self, a: &Access, capacity: u64) {
        if let Admission::AdaptSize(s) = self {
            s.update(a, capacity);
        }
    }

    /// Whether a missed object may be inserted.
    fn admit(&mut self, a: &Access) -> bool {
        match self {
            // libCacheSim inserts the id on its first miss and admits afterwards.
            Admission::Seen(seen) => seen.insert(a.key, ()).is_some(),
            Admission::Size { max } => u64::from(a.size) < *max,
            Admission::Prob { threshold, rng } => rng.next_u64() % MAX_MODULE < *threshold,
            Admission::SizeProb { exponent, rng } => {
                let prob = (-*exponent * f64::from(a.size)).exp();
                rng.roll() < prob
            }
            Admission::AdaptSize(s) => s.admit(a),
        }
    }
}

/// An eviction policy behind an admission policy.
pub struct Admitted {
    inner: Box<dyn Policy>,
    admission: Admission,
    label: &'static str,
}

/// Builds `inner` behind the admissioner of row `entry` with `params`.
pub(crate) fn wrap(
    inner: Box<dyn Policy>,
    entry: &'static AdmitEntry,
    params: &Params,
) -> Result<Box<dyn Policy>, SpecError> {
    let admission = Admission::build(entry, params)?;
    Ok(Box::new(Admitted { inner, admission, label: entry.name }))
}

impl Policy for Admitted {
    fn name(&self) -> String {
        format!("{}+{}", self.inner.name(), self.label)
    }
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }
    fn occupancy(&self) -> u64 {
        self.inner.occupancy()
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn contains(&self, key: Key) -> bool {
        self.inner.contains(key)
    }
    fn lookup(&mut self, a: &Access) -> bool {
        let capacity = self.inner.capacity();
        self.admission.update(a, capacity);
        self.inner.lookup(a)
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        if self.admission.admit(a) {
            self.inner.insert(a, evicted);
        }
    }
    fn evict(&mut self, now: &Access) -> Option<Key> {
        self.inner.evict(now)
    }
    fn remove(&mut self, key: Key) -> bool {
        self.inner.remove(key)
    }
    fn training_time(&self) -> Option<std::time::Duration> {
        self.inner.training_time()
    }
    fn observe_next_access(&mut self, a: &Access) {
        self.inner.observe_next_access(a)
    }
    fn make_room(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.inner.make_room(a, evicted)
    }
    fn access(&mut self, a: &Access, evicted: &mut Vec<Key>) -> bool {
        if self.lookup(a) {
            return true;
        }
        // libCacheSim asks the admissioner before the too-large check, so a
        // random admissioner draws for oversized objects too.
        if self.admission.admit(a) && u64::from(a.size) <= self.inner.capacity() {
            self.inner.insert(a, evicted);
        }
        false
    }
}

/// Per-object statistics of AdaptSize.
#[derive(Clone, Copy, Default)]
struct ObjInfo {
    seen: f64,
    size: i64,
}

const EWMA_DECAY: f64 = 0.3;
const GSS_R: f64 = 0.618_033_99;
const GSS_V: f64 = 1.0 - GSS_R;
const TOL: f64 = 3.0e-8;

/// AdaptSize as libCacheSim's `admission/adaptsize/adaptsize.cpp` (itself the
/// paper's simulator code): per-interval request counts folded into an
/// exponentially decayed long-term count at each reconfiguration, which
/// searches log2(c) for the best modelled hit ratio. Reconfiguration is
/// O(objects seen) every `interval` requests; requests are O(1).
///
/// The model's terms depend on an object only through its (size, count)
/// pair, and objects share few of them (block sizes, counts decayed from
/// small integers), so its sums run over distinct pairs, each term times
/// its objects: ~20 passes over the pairs per evaluated `c` instead of over
/// every object. The sums equal libCacheSim's up to rounding, so the search
/// picks the same `c` unless two candidates' hit ratios tie within it.
struct AdaptSize {
    cache_size: u64,
    max_iteration: u64,
    reconf_interval: u64,
    next_reconf: u64,
    stat_size: u64,
    c: f64,
    interval: KeyMap<ObjInfo>,
    longterm: KeyMap<ObjInfo>,
    /// Distinct (size, count) pairs of the tracked objects, with how many
    /// objects have each.
    pairs: Vec<(f64, f64, f64)>,
    /// `pairs`' indices by the bits of their values.
    pair_index: rustc_hash::FxHashMap<(u64, u64), u32>,
    /// Per pair: its admission probability.
    probs: Vec<f64>,
    rng: Lehmer64,
}

impl AdaptSize {
    fn new(max_iteration: u64, reconf_interval: u64, rng: Lehmer64) -> Self {
        AdaptSize {
            cache_size: 0,
            max_iteration,
            reconf_interval,
            next_reconf: reconf_interval,
            stat_size: 0,
            c: f64::from(1u32 << 15),
            interval: key_map(1024),
            longterm: key_map(1024),
            pairs: Vec::new(),
            pair_index: rustc_hash::FxHashMap::default(),
            probs: Vec::new(),
            rng,
        }
    }

    fn admit(&mut self, a: &Access) -> bool {
        let prob = (-f64::from(a.size) / self.c).exp();
        self.rng.roll() < prob
    }

    fn update(&mut self, a: &Access, cache_size: u64) {
        self.cache_size = cache_size;
        self.reconfigure();
        let size = i64::from(a.size);
        let in_interval = self.interval.get(&a.key).map(|o| o.size);
        let in_longterm = self.longterm.get(&a.key).map(|o| o.size);
        if in_interval.is_none() && in_longterm.is_none() {
            self.stat_size = self.stat_size.wrapping_add(size as u64);
        } else {
            for old in [in_interval, in_longterm].into_iter().flatten() {
                if old != size {
                    self.stat_size = self.stat_size.wrapping_sub(old as u64).wrapping_add(size as u64);
                }
            }
        }
        let o = self.interval.entry(a.key).or_default();
        o.seen += 1.0;
        o.size = size;
    }

    fn reconfigure(&mut self) {
        self.next_reconf = self.next_reconf.wrapping_sub(1);
        if self.next_reconf > 0 {
            return;
        }
        if self.stat_size <= self.cache_size.wrapping_mul(3) {
            self.next_reconf = self.next_reconf.wrapping_add(1000);
            return;
        }
        self.next_reconf = self.reconf_interval;
        for o in self.longterm.values_mut() {
            o.seen *= EWMA_DECAY;
        }
        for (&k, o) in &self.interval {
            match self.longterm.get_mut(&k) {
                None => {
                    self.longterm.insert(k, *o);
                }
                Some(l) => {
                    l.seen += (1.0 - EWMA_DECAY) * o.seen;
                    l.size = o.size;
                }
            }
        }
        self.interval.clear();
        self.pairs.clear();
        self.pair_index.clear();
        let stat_size = &mut self.stat_size;
        let (pairs, pair_index) = (&mut self.pairs, &mut self.pair_index);
        self.longterm.retain(|_, o| {
            if o.seen < 0.1 {
                *stat_size = stat_size.wrapping_sub(o.size as u64);
                return false;
            }
            let (size, seen) = (o.size as f64, o.seen);
            let k = *pair_index.entry((size.to_bits(), seen.to_bits())).or_insert_with(|| {
                pairs.push((size, seen, 0.0));
                (pairs.len() - 1) as u32
            });
            pairs[k as usize].2 += 1.0;
            true
        });

        let mut x0 = 0.0;
        let mut x1 = (self.cache_size as f64).log2();
        let mut x2;
        let mut x3 = x1;
        let mut best = 0.0;
        let mut i = 2;
        while f64::from(i) < x3 {
            let h = self.model_hit_rate(f64::from(i));
            if h > best {
                best = h;
                x1 = f64::from(i);
            }
            i += 4;
        }
        let mut h1 = best;
        let mut h2;
        if x3 - x1 > x1 - x0 {
            x2 = x1 + GSS_V * (x3 - x1);
            h2 = self.model_hit_rate(x2);
        } else {
            x2 = x1;
            h2 = h1;
            x1 = x0 + GSS_V * (x1 - x0);
            h1 = self.model_hit_rate(x1);
        }
        let mut iteration = 0;
        while iteration < self.max_iteration && (x3 - x0).abs() > TOL * (x1.abs() + x2.abs()) {
            iteration += 1;
            if h1.is_nan() || h2.is_nan() {
                break;
            }
            if h2 > h1 {
                x0 = x1;
                x1 = x2;
                x2 = GSS_R * x1 + GSS_V * x3;
                h1 = h2;
                h2 = self.model_hit_rate(x2);
            } else {
                x3 = x2;
                x2 = x1;
                x1 = GSS_R * x2 + GSS_V * x0;
                h2 = h1;
                h1 = self.model_hit_rate(x1);
            }
        }
        if h1.is_nan() || h2.is_nan() {
            // libCacheSim warns and keeps the old c.
        } else if h1 > h2 {
            self.c = 2f64.powf(x1);
        } else {
            self.c = 2f64.powf(x2);
        }
    }

    /// The sum of `term(size, count, probability)` over the tracked objects.
    fn sum_terms(&self, term: impl Fn(f64, f64, f64) -> f64) -> f64 {
        self.pairs.iter().zip(&self.probs).map(|(&(s, n, objects), &p)| objects * term(s, n, p)).sum()
    }

    /// The paper's model of the hit ratio when admitting with `c = 2^log2c`.
    fn model_hit_rate(&mut self, log2c: f64) -> f64 {
        let c = 2f64.powf(log2c);
        self.probs.clear();
        self.probs.extend(self.pairs.iter().map(|&(s, _, _)| (-s / c).exp()));
        let sum = self.sum_terms(|s, n, p| n * p * s);
        if sum <= 0.0 {
            return 0.0;
        }
        let cache_size = self.cache_size as f64;
        let mut t = cache_size / sum;
        for _ in 0..20 {
            if t > 1e70 {
                break;
            }
            let the_c = self.sum_terms(|s, n, p| {
                let prod = n * t;
                if prod > 150.0 {
                    s
                } else {
                    let e = p * (prod.exp() - 1.0);
                    s * (e / (1.0 + e))
                }
            });
            t = cache_size * t / the_c;
        }
        self.sum_terms(|_, n, p| {
            let a = op1(t, n, p);
            let b = op2(t, n, p);
            let r = if a != 0.0 && b == 0.0 { 0.0 } else { a / b };
            // NaN passes through as in libCacheSim (`tmp < 0`, `tmp > 1` both false).
            n * r.clamp(0.0, 1.0)
        })
    }
}

fn op1(t: f64, l: f64, p: f64) -> f64 {
    l * p * t * (840.0 + 60.0 * l * t + 20.0 * l * l * t * t + l * l * l * t * t * t)
}

fn op2(t: f64, l: f64, p: f64) -> f64 {
    840.0
        + 120.0 * l * (-3.0 + 7.0 * p) * t
        + 60.0 * l * l * (1.0 + p) * t * t
        + 4.0 * l * l * l * (-1.0 + 5.0 * p) * t * t * t
        + l * l * l * l * p * t * t * t * t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(key: Key, size: u32) -> Access {
        Access { key, size, ..Access::default() }
    }

    #[test]
    fn lehmer64_matches_libcachesim_first_draws() {
        // state *= 0xda942042e4dd58b5 (mod 2^128), output the high 64 bits.
        let mut r = Lehmer64::new(DEFAULT_SEED);
        let s = u128::from(DEFAULT_SEED).wrapping_mul(0xda94_2042_e4dd_58b5);
        assert_eq!(r.next_u64(), (s >> 64) as u64);
        let s2 = s.wrapping_mul(0xda94_2042_e4dd_58b5);
        assert_eq!(r.next_u64(), (s2 >> 64) as u64);
    }

    #[test]
    fn one_hit_wonders_are_rejected_once() {
        let mut p = crate::build("lru+tinylfu", 100).unwrap();
        let mut ev = Vec::new();
        assert!(!p.access(&acc(1, 10), &mut ev));
        assert!(!p.contains(1), "first miss is not admitted");
        assert!(!p.access(&acc(1, 10), &mut ev));
        assert!(p.contains(1), "second miss is admitted");
        assert!(p.access(&acc(1, 10), &mut ev));
        assert_eq!(p.name(), "LRU+tinylfu");
    }

    #[test]
    fn size_threshold_is_strict() {
        let mut p = crate::build("fifo+size:max=16", 100).unwrap();
        let mut ev = Vec::new();
        p.access(&acc(1, 16), &mut ev);
        p.access(&acc(2, 15), &mut ev);
        assert!(!p.contains(1) && p.contains(2));
        assert!(crate::build("lru+size:max=1MiB", 1 << 30).is_ok());
    }

    #[test]
    fn random_admission_is_reproducible_and_seeded() {
        let run = |spec: &str| {
            let mut p = crate::build(spec, 1 << 20).unwrap();
            let mut ev = Vec::new();
            (0..2000u64).map(|k| (p.access(&acc(k % 300, 100), &mut ev), p.len())).collect::<Vec<_>>()
        };
        for spec in ["arc+prob:p=0.5,seed=1", "lru+sizeprob:exponent=0.001", "lru+adaptsize:interval=100"] {
            assert_eq!(run(spec), run(spec), "{spec}");
        }
        assert_ne!(run("lru+prob:p=0.5,seed=1"), run("lru+prob:p=0.5,seed=2"));
        // About half the first-time misses are admitted.
        let mut p = crate::build("lru+prob:p=0.5", 1 << 30).unwrap();
        let mut ev = Vec::new();
        for k in 0..10_000 {
            p.access(&acc(k, 1), &mut ev);
        }
        assert!((4500..5500).contains(&p.len()), "{}", p.len());
    }

    #[test]
    fn bad_admission_specs_are_refused() {
        for spec in ["lru+nope", "lru+prob:p=0", "lru+prob:p=1.5", "lru+size:foo=1", "lru+prob:seed=0", "lru+"] {
            assert!(crate::build(spec, 100).is_err(), "{spec}");
        }
    }
}

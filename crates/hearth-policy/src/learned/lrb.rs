//! LRB, Learning Relaxed Belady (Song et al., NSDI'20): a model learns to
//! predict how far away an object's next request is from the gaps between
//! its past requests, and eviction takes, of 64 sampled residents, the one
//! predicted furthest; an object not requested within a *memory window* of
//! W requests is beyond the relaxed Belady boundary and is evicted first.
//!
//! As the paper and libCacheSim's implementation (its LightGBM parameters),
//! with these choices of Hearth's, named as parameters:
//! - Features of an object at time t: requests since its last request, its
//!   last 16 gaps between requests (libCacheSim keeps 31; missing ones are
//!   missing values), its size, how many of those gaps fall within the
//!   window, and 10 exponentially decayed request counts with half-lives of
//!   2^10 … 2^19 requests.
//! - Training data: from the first eviction on, each request samples one
//!   object uniformly among those it remembers (residents, and evicted ones
//!   requested within the window) and records its features. The sample is
//!   labelled log(1 + requests until the object's next request) when that
//!   comes, or log(1 + 2W) when the object leaves the window unrequested
//!   (log(1 + age + W) when it is evicted past it).
//! - Training: every `batch` labelled samples (16,384; libCacheSim's
//!   131,072 would leave traces of fewer requests untrained), a regression
//!   of 32 trees of depth 5 (LightGBM's 32 leaves), learning rate 0.1, 80%
//!   of the features per tree, drawn from `seed`.
//! - Eviction: before the first model, and whenever the least recently used
//!   resident was last requested a window or more ago, that one (LRU).
//!   Otherwise 64 distinct residents drawn from `seed`; the highest
//!   prediction goes (times the size with `objective=objects`, which favours
//!   the object miss ratio over libCacheSim's default, bytes).
//! - The window: `window=N` requests, or `auto` (default): four times the
//!   requests it took to fill the cache. (The paper tunes W per trace on a
//!   prefix; libCacheSim fixes it at 2^26, which a trace shorter than that
//!   never reaches.)

use std::collections::VecDeque;
use std::str::FromStr;

use hearth_core::{key_map, Access, Key, KeyMap, List, Policy, Slab};

use super::{Model, Rows, Training, TreeParams};
use crate::admission::Lehmer64;
use crate::SpecError;

const GAPS: usize = 16;
const DECAYED_COUNTS: usize = 10;
/// The first decayed count's half-life is 2^10 requests.
const FIRST_HALF_LIFE_LOG2: i32 = 10;
const FEATURES: usize = 1 + GAPS + 2 + DECAYED_COUNTS;
const CANDIDATES: usize = 64;
const CANDIDATE_TRIALS: usize = 200;
const MIN_AUTO_WINDOW: u64 = 10_000;
const NIL: u32 = u32::MAX;

/// What an eviction's prediction is weighed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    /// libCacheSim's default: the predicted distance alone.
    Bytes,
    /// The distance times the size: larger objects go first.
    Objects,
}

impl FromStr for Objective {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "bytes" => Ok(Objective::Bytes),
            "objects" => Ok(Objective::Objects),
            _ => Err(()),
        }
    }
}

/// The memory window, in requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    Requests(u64),
    /// Four times the requests it took to fill the cache.
    Auto,
}

impl FromStr for Window {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "auto" => Ok(Window::Auto),
            n => n.parse().map(Window::Requests).map_err(|_| ()),
        }
    }
}

#[derive(Clone, Copy)]
struct Meta {
    key: Key,
    size: u32,
    last: u64,
    /// The latest gaps, the newest at `gaps[(next_gap - 1) % GAPS]`.
    gaps: [u32; GAPS],
    n_gaps: u8,
    next_gap: u8,
    /// Decayed request counts as of `last`.
    counts: [f32; DECAYED_COUNTS],
    /// Position in `residents`, or NIL when evicted.
    resident: u32,
    /// Position in `remembered`.
    remembered: u32,
    /// Its first unlabelled sample in `pending`, or NIL.
    samples: u32,
}

struct Pending {
    features: [f32; FEATURES],
    taken: u64,
    next: u32,
}

pub struct Lrb {
    capacity: u64,
    used: u64,
    window: Option<u64>,
    auto_window: bool,
    batch: usize,
    objective: Objective,
    /// Remembered keys (resident or not) -> slab node.
    index: KeyMap<u32>,
    slab: Slab<Meta>,
    /// Residents, most recently requested at the front.
    recency: List,
    residents: Vec<u32>,
    remembered: Vec<u32>,
    /// Every request's (time, key), to forget objects left unrequested a window long.
    requests: VecDeque<(u64, Key)>,
    pending: Vec<Pending>,
    free_pending: Vec<u32>,
    x: Rows,
    y: Vec<f64>,
    model: Model,
    rng: Lehmer64,
    now: u64,
    sampling: bool,
    candidates: Rows,
    candidate_nodes: Vec<u32>,
    half_lives: [f64; DECAYED_COUNTS],
}

impl Lrb {
    /// The fewest and most labelled samples a training batch may hold.
    pub const MIN_BATCH: usize = 2;
    pub const MAX_BATCH: usize = 1 << 24;

    pub fn new(
        capacity: u64,
        window: Window,
        batch: usize,
        objective: Objective,
        seed: u64,
    ) -> Result<Self, SpecError> {
        if seed == 0 {
            return Err(SpecError::range("lrb", "seed must not be 0 (the generator would stay at 0)"));
        }
        if window == Window::Requests(0) {
            return Err(SpecError::range("lrb", "window must be at least 1 request, or auto"));
        }
        if !(Self::MIN_BATCH..=Self::MAX_BATCH).contains(&batch) {
            return Err(SpecError::range("lrb", format!("batch must be between 2 and 16777216 samples, got {batch}")));
        }
        Ok(Lrb {
            capacity,
            used: 0,
            window: match window {
                Window::Requests(n) => Some(n),
                Window::Auto => None,
            },
            auto_window: window == Window::Auto,
            batch,
            objective,
            index: key_map(1024),
            slab: Slab::default(),
            recency: List::new(),
            residents: Vec::new(),
            remembered: Vec::new(),
            requests: VecDeque::new(),
            pending: Vec::new(),
            free_pending: Vec::new(),
            x: Rows::new(FEATURES),
            y: Vec::new(),
            model: Model::new(TreeParams {
                iterations: 32,
                max_depth: 5,
                learning_rate: 0.1,
                bins: 64,
                subsample: 1.0,
                colsample: 0.8,
                seed,
            }),
            rng: Lehmer64::new(seed),
            now: 0,
            sampling: false,
            candidates: Rows::new(FEATURES),
            candidate_nodes: Vec::with_capacity(CANDIDATES),
            half_lives: std::array::from_fn(|k| 2f64.powi(FIRST_HALF_LIFE_LOG2 + k as i32)),
        })
    }

    /// How often and how long it trained.
    pub fn training(&self) -> Training {
        self.model.training()
    }

    /// The memory window in requests (`None` while `auto` waits for the cache to fill).
    pub fn window(&self) -> Option<u64> {
        self.window
    }

    fn features(&self, m: &Meta) -> [f32; FEATURES] {
        let window = self.window.unwrap_or(u64::MAX);
        let age = self.now - m.last;
        let mut f = [f32::NAN; FEATURES];
        f[0] = age as f32;
        let mut span = 0u64;
        let mut within = 0u32;
        for j in 0..usize::from(m.n_gaps) {
            let gap = m.gaps[(usize::from(m.next_gap) + GAPS - 1 - j) % GAPS];
            f[1 + j] = gap as f32;
            span += u64::from(gap);
            within += u32::from(span < window);
        }
        f[1 + GAPS] = m.size as f32;
        f[2 + GAPS] = within as f32;
        for k in 0..DECAYED_COUNTS {
            f[3 + GAPS + k] = m.counts[k] * (-(age as f64) / self.half_lives[k]).exp2() as f32;
        }
        f
    }

    /// Labels every pending sample of node `id` with `distance` and trains
    /// when a batch is complete.
    fn label(&mut self, id: u32, distance: impl Fn(u64) -> u64) {
        let mut p = std::mem::replace(&mut self.slab.get_mut(id).samples, NIL);
        while p != NIL {
            let sample = &self.pending[p as usize];
            let row: [f64; FEATURES] = std::array::from_fn(|i| f64::from(sample.features[i]));
            self.x.push(&row);
            self.y.push((distance(sample.taken) as f64).ln_1p());
            self.free_pending.push(p);
            p = sample.next;
        }
        if self.y.len() >= self.batch {
            self.model.train(&mut self.x, &self.y);
            self.x.clear();
            self.y.clear();
        }
    }

    /// Samples one remembered object's features, labelled at its next request.
    fn sample(&mut self) {
        if self.remembered.is_empty() {
            return;
        }
        let id = self.remembered[(self.rng.next_u64() % self.remembered.len() as u64) as usize];
        let features = self.features(self.slab.get(id));
        let next = self.slab.get(id).samples;
        let sample = Pending { features, taken: self.now, next };
        let p = match self.free_pending.pop() {
            Some(p) => {
                self.pending[p as usize] = sample;
                p
            }
            None => {
                self.pending.push(sample);
                (self.pending.len() - 1) as u32
            }
        };
        self.slab.get_mut(id).samples = p;
    }

    /// Drops node `id` (not resident) and its pending samples' labels.
    fn forget(&mut self, id: u32) {
        let m = self.slab.release(id);
        self.index.remove(&m.key);
        let mut p = m.samples;
        while p != NIL {
            self.free_pending.push(p);
            p = self.pending[p as usize].next;
        }
        let pos = m.remembered as usize;
        self.remembered.swap_remove(pos);
        if let Some(&moved) = self.remembered.get(pos) {
            self.slab.get_mut(moved).remembered = pos as u32;
        }
    }

    /// Forgets evicted objects not requested for a window, their samples
    /// labelled 2W.
    fn forget_old(&mut self) {
        let Some(window) = self.window else { return };
        while let Some(&(time, key)) = self.requests.front() {
            if time + window > self.now {
                break;
            }
            self.requests.pop_front();
            let Some(&id) = self.index.get(&key) else { continue };
            let m = self.slab.get(id);
            if m.last == time && m.resident == NIL {
                self.label(id, |_| 2 * window);
                self.forget(id);
            }
        }
    }

    fn unlink_resident(&mut self, id: u32) {
        self.slab.unlink(&mut self.recency, id);
        let m = self.slab.get_mut(id);
        let pos = m.resident as usize;
        m.resident = NIL;
        self.used -= u64::from(m.size);
        self.residents.swap_remove(pos);
        if let Some(&moved) = self.residents.get(pos) {
            self.slab.get_mut(moved).resident = pos as u32;
        }
    }

    /// The resident to evict.
    fn victim(&mut self) -> u32 {
        let lru = self.recency.tail().expect("a resident to evict");
        let window = self.window.unwrap_or(u64::MAX);
        if !self.model.is_trained() || self.now - self.slab.get(lru).last >= window {
            return lru;
        }
        self.candidates.clear();
        self.candidate_nodes.clear();
        let wanted = CANDIDATES.min(self.residents.len());
        let mut trials = 0;
        while self.candidate_nodes.len() < wanted {
            trials += 1;
            let id = self.residents[(self.rng.next_u64() % self.residents.len() as u64) as usize];
            if trials < CANDIDATE_TRIALS && self.candidate_nodes.contains(&id) {
                continue;
            }
            let f = self.features(self.slab.get(id));
            let row: [f64; FEATURES] = std::array::from_fn(|i| f64::from(f[i]));
            self.candidates.push(&row);
            self.candidate_nodes.push(id);
        }
        let predicted = self.model.predict(&self.candidates);
        let mut best = (f64::NEG_INFINITY, lru);
        for (&id, &p) in self.candidate_nodes.iter().zip(&predicted) {
            let score = match self.objective {
                Objective::Bytes => p,
                Objective::Objects => p * f64::from(self.slab.get(id).size),
            };
            if score > best.0 {
                best = (score, id);
            }
        }
        best.1
    }
}

impl Policy for Lrb {
    fn name(&self) -> String {
        "LRB".into()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.used
    }
    fn len(&self) -> usize {
        self.residents.len()
    }
    fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|&id| self.slab.get(id).resident != NIL)
    }

    fn training_time(&self) -> Option<std::time::Duration> {
        Some(self.training().time)
    }

    fn lookup(&mut self, a: &Access) -> bool {
        self.now += 1;
        self.forget_old();
        let mut hit = false;
        if let Some(&id) = self.index.get(&a.key) {
            let now = self.now;
            self.label(id, |taken| now - taken);
            let m = self.slab.get_mut(id);
            let gap = (now - m.last).min(u64::from(u32::MAX)) as u32;
            m.gaps[usize::from(m.next_gap)] = gap;
            m.next_gap = ((usize::from(m.next_gap) + 1) % GAPS) as u8;
            m.n_gaps = (m.n_gaps + 1).min(GAPS as u8);
            for k in 0..DECAYED_COUNTS {
                m.counts[k] = m.counts[k] * (-(gap as f64) / self.half_lives[k]).exp2() as f32 + 1.0;
            }
            m.last = now;
            hit = m.resident != NIL;
            if hit {
                self.slab.move_to_front(&mut self.recency, id);
            }
            self.requests.push_back((now, a.key));
        }
        if self.sampling {
            self.sample();
        }
        hit
    }

    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let id = match self.index.get(&a.key) {
            Some(&id) => id,
            None => {
                let id = self.slab.alloc(Meta {
                    key: a.key,
                    size: a.size,
                    last: self.now,
                    gaps: [0; GAPS],
                    n_gaps: 0,
                    next_gap: 0,
                    counts: [1.0; DECAYED_COUNTS],
                    resident: NIL,
                    remembered: self.remembered.len() as u32,
                    samples: NIL,
                });
                self.index.insert(a.key, id);
                self.remembered.push(id);
                self.requests.push_back((self.now, a.key));
                id
            }
        };
        let m = self.slab.get_mut(id);
        m.size = a.size;
        m.resident = self.residents.len() as u32;
        self.residents.push(id);
        self.used += u64::from(a.size);
        self.slab.push_front(&mut self.recency, id);
    }

    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.residents.is_empty() {
            return None;
        }
        if !self.sampling {
            self.sampling = true;
            if self.auto_window {
                self.window = Some((4 * self.now).max(MIN_AUTO_WINDOW));
            }
        }
        let id = self.victim();
        self.unlink_resident(id);
        let m = self.slab.get(id);
        let key = m.key;
        let age = self.now - m.last;
        if let Some(window) = self.window.filter(|&w| age >= w) {
            self.label(id, |_| age + window);
            self.forget(id);
        }
        Some(key)
    }

    fn remove(&mut self, key: Key) -> bool {
        let Some(&id) = self.index.get(&key) else { return false };
        let resident = self.slab.get(id).resident != NIL;
        if resident {
            self.unlink_resident(id);
        }
        self.forget(id);
        resident
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::DEFAULT_SEED;
    use crate::Lru;

    fn acc(key: Key, size: u32) -> Access {
        Access { key, size, ..Access::default() }
    }

    /// A hot set of 500 keys requested in turn, each between two keys of a
    /// scan never requested again, in a cache of 1,000: a hot key comes back
    /// after 1,500 distinct keys, so LRU misses everything. Its gaps are all
    /// 1,500 while a scan key has none, so a model of the next request's
    /// distance from the gaps keeps the hot set: 2/3, the least any policy
    /// can miss.
    fn hot_keys_between_scans(rounds: u64) -> Vec<Key> {
        let mut keys = Vec::new();
        for round in 0..rounds {
            for i in 0..500 {
                keys.push(i);
                keys.push(1_000_000 + round * 1000 + 2 * i);
                keys.push(1_000_000 + round * 1000 + 2 * i + 1);
            }
        }
        keys
    }

    fn miss_ratio(policy: &mut dyn Policy, keys: &[Key]) -> f64 {
        let mut evicted = Vec::new();
        let misses = keys.iter().filter(|&&k| !policy.access(&acc(k, 1), &mut evicted)).count();
        assert!(policy.occupancy() <= policy.capacity());
        misses as f64 / keys.len() as f64
    }

    #[test]
    fn learning_beats_lru_when_gaps_predict_the_next_request() {
        let keys = hot_keys_between_scans(60);
        let lru = miss_ratio(&mut Lru::new(1000), &keys);
        let mut lrb = Lrb::new(1000, Window::Auto, 16384, Objective::Bytes, DEFAULT_SEED).unwrap();
        let learned = miss_ratio(&mut lrb, &keys);
        assert!(lru > 0.99, "LRU {lru}");
        assert!(lrb.training().models >= 2, "{:?}", lrb.training());
        assert!(learned < 0.8, "LRB {learned}, LRU {lru}");
    }

    #[test]
    fn the_same_seed_gives_the_same_victims() {
        let run = |seed| {
            let mut c = Lrb::new(20_000, Window::Requests(5000), 2048, Objective::Objects, seed).unwrap();
            let mut evicted = Vec::new();
            let mut state = 7u64;
            for _ in 0..40_000 {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let key = (state >> 33) % 3000 / (1 + (state >> 60));
                c.access(&acc(key, 1 + (key % 7) as u32 * 100), &mut evicted);
                assert!(c.occupancy() <= c.capacity());
                if key % 97 == 0 {
                    c.remove(key / 2);
                }
            }
            (evicted, c.training())
        };
        let (first, training) = run(5);
        assert!(training.models > 0, "{training:?}");
        assert_eq!(first, run(5).0);
        assert_ne!(first, run(6).0);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let err = |text: &str| text.parse::<crate::PolicySpec>().unwrap_err().to_string();
        assert_eq!(err("lrb:window=0"), "lrb: window must be \"auto\" or a whole number >= 1, got \"0\"");
        assert_eq!(err("lrb:batch=1"), "lrb: batch must be between 2 and 16777216 samples, got 1");
        assert_eq!(err("lrb:seed=0"), "lrb: seed must not be 0 (the generator would stay at 0)");
        assert_eq!(err("lrb:objective=hits"), "lrb: objective must be \"bytes\" or \"objects\", got \"hits\"");
        assert_eq!(err("lrb:window=soon"), "lrb: window must be \"auto\" or a whole number >= 1, got \"soon\"");
    }
}

//! LHD, Least Hit Density (Beckmann, Chen and Cidon, NSDI'18): evict the
//! item with the fewest expected hits per byte-request of cache space it
//! will occupy, its *hit density*, learned per class of items from the ages
//! at which past items were hit or evicted.
//!
//! As the paper's reference implementation (the one libCacheSim wraps), with
//! its constants:
//! - An item's class is the coarsened sum of the ages of its last two hits
//!   (16 classes, from log2 steps below a maximum age of 20,000); ages are
//!   requests since the item's last request, shifted right by a coarsening
//!   that is re-chosen at the 6th and 26th reconfiguration from the number
//!   of resident items (10 before).
//! - Each class counts hits and evictions by age. Every 2^20 requests the
//!   counts decay by 0.9 and hit densities are recomputed: at age a, the
//!   hits at ages >= a over the expected remaining lifetime of items that
//!   reached a. An item's rank is its class's density at its age divided by
//!   its size. Before the first reconfiguration ranks come from the
//!   reference implementation's prior, (class + 1) / (age + 1), classes
//!   numbered from 16 (its one application has id 1).
//! - A victim is the lowest rank among 8 items drawn at random (32 after 50
//!   reconfigurations) and the last 8 admitted items whose rank was below
//!   the running average victim rank (EWMA, 0.9).
//! - Explorers: each request makes its item an explorer with probability
//!   1/32 (during the first 50 reconfigurations, while 1% of the capacity
//!   is left for them); an explorer's rank is raised by 1 so it stays long
//!   enough to be learnt from.
//!
//! Draws use libCacheSim's generator (Lehmer64, `seed=S`) in the reference
//! implementation's order (one per request, then one per sampled candidate),
//! over the same dense array, so with the default seed the victims are
//! libCacheSim's. A hit keeps the item's first size (Hearth's occupancy
//! never exceeds the capacity; the reference implementation takes the new
//! size without evicting).
//!
//! O(1) per request plus 16 or 40 ranks per eviction; a reconfiguration is
//! O(16 x 20,000) once per 2^20 requests. Memory: 3.8 MB of class statistics.

use hearth_core::{key_map, Access, Key, KeyMap, Policy};

use crate::admission::Lehmer64;
use crate::SpecError;

const HIT_AGE_CLASSES: usize = 16;
/// The class number of the first class (the reference implementation's
/// application id 1 times the hit-age classes), for the prior.
const CLASS_OFFSET: usize = HIT_AGE_CLASSES;
const MAX_AGE: u64 = 20_000;
const REQUESTS_PER_RECONFIGURATION: u64 = 1 << 20;
const EWMA_DECAY: f32 = 0.9;
const RECENT_ADMISSIONS: usize = 8;
const EXPLORE_INVERSE_PROBABILITY: u64 = 32;
const EXPLORER_BUDGET_FRACTION: f32 = 0.01;
const AGE_COARSENING_ERROR_TOLERANCE: f32 = 0.01;
/// Reconfigurations after which sampling widens and exploring stops.
const WARM_RECONFIGURATIONS: u32 = 50;

#[derive(Clone, Copy)]
struct Tag {
    key: Key,
    size: u32,
    /// The request count when the item was last requested.
    timestamp: u64,
    last_hit_age: u64,
    last_last_hit_age: u64,
    explorer: bool,
}

/// Hits and evictions by coarsened age, and the densities learnt from them.
struct Class {
    hits: Vec<f32>,
    evictions: Vec<f32>,
    densities: Vec<f32>,
}

pub struct Lhd {
    capacity: u64,
    used: u64,
    /// Key -> position in `tags`.
    index: KeyMap<u32>,
    /// Every resident item, in no order.
    tags: Vec<Tag>,
    classes: Vec<Class>,
    /// Recently admitted items that looked like victims (ring).
    recent: [Option<Key>; RECENT_ADMISSIONS],
    recent_head: usize,
    ewma_victim_density: f32,
    explorer_budget: i64,
    timestamp: u64,
    until_reconfiguration: u64,
    reconfigurations: u32,
    age_shift: u32,
    ewma_objects: f32,
    ewma_objects_mass: f32,
    rng: Lehmer64,
}

impl Lhd {
    pub fn new(capacity: u64, seed: u64) -> Result<Self, SpecError> {
        if seed == 0 {
            return Err(SpecError::range("lhd", "seed must not be 0 (the generator would stay at 0)"));
        }
        let classes = (0..HIT_AGE_CLASSES)
            .map(|c| Class {
                hits: vec![0.0; MAX_AGE as usize],
                evictions: vec![0.0; MAX_AGE as usize],
                densities: (0..MAX_AGE).map(|a| ((CLASS_OFFSET + c + 1) as f64 / (a + 1) as f64) as f32).collect(),
            })
            .collect();
        Ok(Lhd {
            capacity,
            used: 0,
            index: key_map(1024),
            tags: Vec::with_capacity(1024),
            classes,
            recent: [None; RECENT_ADMISSIONS],
            recent_head: 0,
            ewma_victim_density: 0.0,
            explorer_budget: (capacity as f32 * EXPLORER_BUDGET_FRACTION) as i64,
            timestamp: 0,
            until_reconfiguration: REQUESTS_PER_RECONFIGURATION,
            reconfigurations: 0,
            age_shift: 10,
            ewma_objects: 0.0,
            ewma_objects_mass: 0.0,
            rng: Lehmer64::new(seed),
        })
    }

    /// log2 steps of a summed hit age below [`MAX_AGE`]: young ages get high classes.
    fn hit_age_class(mut age: u64) -> usize {
        if age == 0 {
            return HIT_AGE_CLASSES - 1;
        }
        let mut class = 0;
        while age < MAX_AGE && class < HIT_AGE_CLASSES - 1 {
            age <<= 1;
            class += 1;
        }
        class
    }

    fn class_of(tag: &Tag) -> usize {
        Self::hit_age_class(tag.last_hit_age + tag.last_last_hit_age)
    }

    fn age(&self, tag: &Tag) -> u64 {
        ((self.timestamp - tag.timestamp) >> self.age_shift).min(MAX_AGE - 1)
    }

    fn density(&self, tag: &Tag) -> f32 {
        let age = self.age(tag);
        if age == MAX_AGE - 1 {
            return f32::MIN;
        }
        let density = self.classes[Self::class_of(tag)].densities[age as usize] / tag.size as f32;
        if tag.explorer {
            density + 1.0
        } else {
            density
        }
    }

    /// The reference implementation's `update`: one request for the item at
    /// `pos`, just inserted or hit.
    fn update(&mut self, pos: usize, inserted: bool) {
        let mut tag = self.tags[pos];
        if inserted {
            tag.last_last_hit_age = MAX_AGE;
            tag.last_hit_age = 0;
        } else {
            let age = self.age(&tag);
            self.classes[Self::class_of(&tag)].hits[age as usize] += 1.0;
            if tag.explorer {
                self.explorer_budget += i64::from(tag.size);
            }
            tag.last_last_hit_age = tag.last_hit_age;
            tag.last_hit_age = age;
        }
        tag.timestamp = self.timestamp;
        let explore = self.rng.next_u64().is_multiple_of(EXPLORE_INVERSE_PROBABILITY);
        tag.explorer = explore && self.explorer_budget > 0 && self.reconfigurations < WARM_RECONFIGURATIONS;
        if tag.explorer {
            self.explorer_budget -= i64::from(tag.size);
        }
        self.tags[pos] = tag;
        if inserted && !explore && self.density(&tag) < self.ewma_victim_density {
            self.recent[self.recent_head % RECENT_ADMISSIONS] = Some(tag.key);
            self.recent_head += 1;
        }
        self.timestamp += 1;
        self.until_reconfiguration -= 1;
        if self.until_reconfiguration == 0 {
            self.reconfigure();
            self.until_reconfiguration = REQUESTS_PER_RECONFIGURATION;
            self.reconfigurations += 1;
        }
    }

    /// The position of the victim: the lowest rank among the sampled and
    /// the recently admitted items.
    fn rank(&mut self) -> usize {
        let samples = if self.reconfigurations > WARM_RECONFIGURATIONS { 32 } else { 8 };
        let mut victim = 0;
        let mut victim_rank = f32::MAX;
        let n = self.tags.len() as u64;
        for _ in 0..samples {
            let pos = (self.rng.next_u64() % n) as usize;
            let rank = self.density(&self.tags[pos]);
            if rank < victim_rank {
                (victim, victim_rank) = (pos, rank);
            }
        }
        for key in self.recent.into_iter().flatten() {
            if let Some(&pos) = self.index.get(&key) {
                let rank = self.density(&self.tags[pos as usize]);
                if rank < victim_rank {
                    (victim, victim_rank) = (pos as usize, rank);
                }
            }
        }
        self.ewma_victim_density = EWMA_DECAY * self.ewma_victim_density + (1.0 - EWMA_DECAY) * victim_rank;
        victim
    }

    fn take(&mut self, pos: usize) -> Key {
        let tag = crate::swap_take(&mut self.tags, &mut self.index, pos, |t| t.key);
        self.used -= u64::from(tag.size);
        tag.key
    }

    fn reconfigure(&mut self) {
        for class in &mut self.classes {
            for (h, e) in class.hits.iter_mut().zip(&mut class.evictions) {
                *h *= EWMA_DECAY;
                *e *= EWMA_DECAY;
            }
        }
        self.adapt_age_coarsening();
        self.model_hit_densities();
    }

    /// Densities from the decayed counts: at each age, hits at that age or
    /// later over the expected remaining lifetime of items that reached it.
    fn model_hit_densities(&mut self) {
        let last = MAX_AGE as usize - 1;
        for class in &mut self.classes {
            let mut events = class.hits[last] + class.evictions[last];
            let mut hits = class.hits[last];
            let mut lifetime = events;
            for a in (0..last).rev() {
                hits += class.hits[a];
                events += class.hits[a] + class.evictions[a];
                lifetime += events;
                class.densities[a] = if events > 1e-5 { hits / lifetime } else { 0.0 };
            }
        }
    }

    /// Re-chooses the age coarsening so the resident items' ages fit below
    /// [`MAX_AGE`], rescaling the histograms to match.
    fn adapt_age_coarsening(&mut self) {
        self.ewma_objects = self.ewma_objects * EWMA_DECAY + self.tags.len() as f32;
        self.ewma_objects_mass = self.ewma_objects_mass * EWMA_DECAY + 1.0;
        if self.reconfigurations != 5 && self.reconfigurations != 25 {
            return;
        }
        let objects = self.ewma_objects / self.ewma_objects_mass;
        let optimal = objects / (AGE_COARSENING_ERROR_TOLERANCE * MAX_AGE as f32);
        let mut shift = 1u32;
        while ((1u64 << shift) as f32) < optimal {
            shift += 1;
        }
        let delta = i64::from(shift) - i64::from(self.age_shift);
        self.age_shift = shift;
        self.ewma_objects *= 8.0;
        self.ewma_objects_mass *= 8.0;
        let last = MAX_AGE as usize - 1;
        let max = MAX_AGE as usize;
        for class in &mut self.classes {
            for counts in [&mut class.hits, &mut class.evictions] {
                if delta < 0 {
                    // Stretch: ages beyond the new range pile into the last bucket.
                    let d = (-delta) as usize;
                    let overflow: f32 = counts[(max >> d)..last].iter().sum();
                    counts[last] += overflow;
                    for a in (0..last).rev() {
                        counts[a] = counts[a >> d] / (1u32 << d) as f32;
                    }
                } else if delta > 0 {
                    // Compress: 2^delta old buckets make one new one.
                    let d = delta as usize;
                    for a in 0..(max >> d) {
                        counts[a] = counts[(a << d)..((a + 1) << d)].iter().sum();
                    }
                    counts[(max >> d)..last].fill(0.0);
                }
            }
        }
    }
}

impl Policy for Lhd {
    fn name(&self) -> String {
        "LHD".into()
    }
    indexed_residency!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&pos) = self.index.get(&a.key) else { return false };
        self.update(pos as usize, false);
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let tag =
            Tag { key: a.key, size: a.size, timestamp: 0, last_hit_age: 0, last_last_hit_age: 0, explorer: false };
        self.index.insert(a.key, self.tags.len() as u32);
        self.tags.push(tag);
        self.used += u64::from(a.size);
        self.update(self.tags.len() - 1, true);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.tags.is_empty() {
            return None;
        }
        let pos = self.rank();
        let tag = self.tags[pos];
        let age = self.age(&tag);
        self.classes[Self::class_of(&tag)].evictions[age as usize] += 1.0;
        if tag.explorer {
            self.explorer_budget += i64::from(tag.size);
        }
        Some(self.take(pos))
    }
    remove_by_index!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_favour_young_hit_ages() {
        assert_eq!(Lhd::hit_age_class(0), HIT_AGE_CLASSES - 1);
        assert_eq!(Lhd::hit_age_class(MAX_AGE), 0, "a new item (no hits) is class 0");
        assert_eq!(Lhd::hit_age_class(MAX_AGE / 2), 1);
        assert!(Lhd::hit_age_class(3) > Lhd::hit_age_class(300));
    }

    #[test]
    fn densities_follow_where_hits_happen() {
        let mut l = Lhd::new(1 << 20, 1).unwrap();
        // Class 3: every item hit at age 2; class 4: items evicted unhit at age 2.
        l.classes[3].hits[2] = 100.0;
        l.classes[4].evictions[2] = 100.0;
        l.model_hit_densities();
        assert!(l.classes[3].densities[0] > 0.0 && l.classes[4].densities[0] == 0.0);
        // Past age 2 nothing is left to hit.
        assert_eq!(l.classes[3].densities[3], 0.0);
        // Expected hits over remaining lifetime: 100 hits over 3 x 100 request-slots.
        assert!((l.classes[3].densities[0] - 1.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn large_and_old_items_rank_lowest() {
        let mut l = Lhd::new(1 << 20, 1).unwrap();
        let mut ev = Vec::new();
        let acc = |key, size, vtime| Access { key, size, vtime, ..Access::default() };
        l.access(&acc(1, 1000, 0), &mut ev);
        l.access(&acc(2, 10, 1), &mut ev);
        let (big, small) = (l.tags[0], l.tags[1]);
        assert!(l.density(&big) < l.density(&small) || big.explorer || small.explorer);
        assert!(Lhd::new(1, 0).is_err());
    }
}

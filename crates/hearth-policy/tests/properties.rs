//! Properties every registered policy must keep on random traces, plus
//! reference checks: LRU and MRU against a naive list, OPT against everyone.

use std::collections::HashSet;

use hearth_core::{Access, Key, Policy, NEVER};
use proptest::prelude::*;

/// One step a driver can take.
#[derive(Clone, Debug)]
enum Step {
    Access(Key),
    /// Invalidation of a key.
    Remove(Key),
    /// A direct call to `Policy::evict`.
    Evict,
}

/// Non-default parameterisations checked alongside every registered name.
const EXTRA_SPECS: &[&str] = &[
    "arc:step=size",
    "lfu:aging=da",
    "lfu:aging=5",
    "clock:bits=3",
    "slru:segments=1",
    "slru:segments=3",
    "s3fifo:small=0.25,ghost=0.5,threshold=1",
    "s3fifo:small=0.3,ghost=0",
    "wtinylfu:freq=exact,window=0.3",
    "wtinylfu:window=0.25,protected=0.5",
    "lruk:k=1",
    "lruk:k=3",
    "qdlp:small=0.3,ghost=0,threshold=2",
    "qdlp:small=0.5,ghost=2",
    "random:seed=7",
    "hyperbolic:samples=2,seed=3",
    "lecar:seed=99",
    "clock2qplus:small=0.3,ghost=0,threshold=2,window=0",
    "clock2qplus:small=0.5,ghost=2,window=1",
    "beladysize:samples=1,seed=5",
    "2q:sizing=bytes",
    "2q:kin=0.5,kout=2,sizing=bytes",
    "lfuda:formula=additive",
    "mq:lifetime=20,history=bytes",
    "mq:qout=0.5,history=bytes",
    "lhd:seed=3",
    "cacheus:seed=11",
    "clockpro:cold=0",
    "clockpro:cold=1",
    "fifomerge:exam=4,keep=1",
    "fifomerge:exam=3,keep=0,retain=recency,seed=5",
    "s3fifod:small=0.3,threshold=2",
];

/// Eviction policies behind admission policies. Not held to OPT's bound:
/// a cache that may refuse an item can beat demand-paging OPT (capacity 1,
/// `a b a`: refusing `b` keeps `a`).
const ADMISSION_SPECS: &[&str] = &[
    "lru+tinylfu",
    "s3fifo+bloom",
    "lirs+tinylfu",
    "fifo+size:max=12",
    "arc+prob:p=0.5,seed=1",
    "wtinylfu+sizeprob:exponent=0.05,seed=7",
    "sieve+adaptsize:interval=10",
    "opt+prob:p=0.7",
];

/// Every registered policy by name, plus [`EXTRA_SPECS`].
fn all_specs() -> Vec<&'static str> {
    hearth_policy::names().into_iter().chain(EXTRA_SPECS.iter().copied()).collect()
}

fn steps(keys: u64) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        20 => (0..keys).prop_map(Step::Access),
        1 => (0..keys).prop_map(Step::Remove),
        1 => Just(Step::Evict),
    ];
    prop::collection::vec(step, 1..300)
}

fn access(key: Key, size: u32, vtime: u64) -> Access {
    Access { key, size, vtime, next_access: NEVER, ..Access::default() }
}

/// Drives `policy` through `steps` and checks, after every step, that it
/// never holds more than its capacity, that its hits, `contains`, `len`,
/// `occupancy` and reported evictions tell one consistent story.
fn check_invariants(policy: &mut dyn Policy, steps: &[Step], size_of: &[u32]) -> Result<(), TestCaseError> {
    let name = policy.name();
    let universe = size_of.len() as Key;
    // Keys the driver believes resident: added when `contains` says so after an
    // insert, dropped when reported evicted or removed.
    let mut shadow: HashSet<Key> = HashSet::new();
    // Each step's next access of its key, for the offline policies.
    let mut next_access = vec![NEVER; steps.len()];
    let mut seen = std::collections::HashMap::new();
    for (t, step) in steps.iter().enumerate().rev() {
        if let Step::Access(key) = *step {
            next_access[t] = seen.insert(key, t as u64).unwrap_or(NEVER);
        }
    }
    let mut evicted = Vec::new();
    for (t, step) in steps.iter().enumerate() {
        evicted.clear();
        let mut inserted = false;
        match *step {
            Step::Access(key) => {
                let a = Access { next_access: next_access[t], ..access(key, size_of[key as usize], t as u64) };
                let held = policy.contains(key);
                let hit = policy.access(&a, &mut evicted);
                prop_assert_eq!(hit, held, "{} step {}: hit disagrees with contains({})", name, t, key);
                if hit {
                    prop_assert!(
                        shadow.contains(&key),
                        "{} step {}: hit on {} it never reported holding",
                        name,
                        t,
                        key
                    );
                }
                for k in &evicted {
                    prop_assert!(shadow.remove(k), "{} step {}: evicted {} it did not hold", name, t, k);
                    prop_assert!(
                        *k == key || !policy.contains(*k),
                        "{} step {}: {} evicted but still held",
                        name,
                        t,
                        k
                    );
                }
                if !hit && policy.contains(key) {
                    shadow.insert(key);
                }
                inserted = !hit && u64::from(a.size) <= policy.capacity();
            }
            Step::Remove(key) => {
                let held = policy.contains(key);
                prop_assert_eq!(
                    policy.remove(key),
                    held,
                    "{} step {}: remove({}) disagrees with contains",
                    name,
                    t,
                    key
                );
                prop_assert!(!policy.contains(key), "{} step {}: {} still held after remove", name, t, key);
                shadow.remove(&key);
            }
            Step::Evict => {
                let was_empty = policy.is_empty();
                match policy.evict(&access(0, 1, t as u64)) {
                    Some(k) => {
                        prop_assert!(shadow.remove(&k), "{} step {}: evict() returned {} it did not hold", name, t, k);
                        prop_assert!(
                            !policy.contains(k),
                            "{} step {}: evict() returned {} but still holds it",
                            name,
                            t,
                            k
                        );
                    }
                    None => prop_assert!(was_empty, "{} step {}: evict() found nothing in a non-empty cache", name, t),
                }
            }
        }

        prop_assert!(
            policy.occupancy() <= policy.capacity(),
            "{} step {}: occupancy {} > capacity {}",
            name,
            t,
            policy.occupancy(),
            policy.capacity()
        );
        let held: Vec<Key> = (0..universe).filter(|&k| policy.contains(k)).collect();
        for k in &held {
            prop_assert!(shadow.contains(k), "{} step {}: holds {} without having reported it", name, t, k);
        }
        prop_assert_eq!(policy.len(), held.len(), "{} step {}: len disagrees with contains", name, t);
        let bytes: u64 = held.iter().map(|&k| u64::from(size_of[k as usize])).sum();
        prop_assert_eq!(policy.occupancy(), bytes, "{} step {}: occupancy disagrees with held sizes", name, t);
        if inserted {
            // An insert reports every eviction made so far.
            prop_assert_eq!(shadow.len(), held.len(), "{} step {}: evictions left unreported after insert", name, t);
        }
    }
    Ok(())
}

/// Drives policy `name` and a naive recency list (most recent first) through
/// `keys`, evicting from the list's most recent end if `evict_most_recent`
/// (MRU) or its least recent end (LRU), and checks both hit and evict alike.
fn matches_naive_list(
    name: &str,
    evict_most_recent: bool,
    size_of: &[u32],
    keys: &[Key],
    capacity: u64,
) -> Result<(), TestCaseError> {
    let mut policy = hearth_policy::build(name, capacity).unwrap();
    let mut naive: Vec<Key> = Vec::new();
    let mut evicted = Vec::new();
    for (t, &key) in keys.iter().enumerate() {
        let size = size_of[key as usize];
        let expected_hit = match naive.iter().position(|&k| k == key) {
            Some(pos) => {
                naive.remove(pos);
                naive.insert(0, key);
                true
            }
            None => false,
        };
        let mut expected_evicted = Vec::new();
        if !expected_hit && u64::from(size) <= capacity {
            let used = |v: &Vec<Key>| v.iter().map(|&k| u64::from(size_of[k as usize])).sum::<u64>();
            while used(&naive) + u64::from(size) > capacity {
                expected_evicted.push(if evict_most_recent { naive.remove(0) } else { naive.pop().unwrap() });
            }
            naive.insert(0, key);
        }
        evicted.clear();
        let hit = policy.access(&access(key, size, t as u64), &mut evicted);
        prop_assert_eq!(hit, expected_hit, "{} step {} key {}", name, t, key);
        prop_assert_eq!(&evicted, &expected_evicted, "{} step {} key {}", name, t, key);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn every_policy_keeps_its_invariants(
        (size_of, steps) in (1u64..48).prop_flat_map(|keys| {
            (prop::collection::vec(1u32..=24, keys as usize), steps(keys))
        }),
        capacity in 1u64..=96,
    ) {
        for name in all_specs().into_iter().chain(ADMISSION_SPECS.iter().copied()) {
            let mut policy = hearth_policy::build(name, capacity).unwrap();
            check_invariants(policy.as_mut(), &steps, &size_of)?;
        }
    }

    #[test]
    fn lru_and_mru_match_a_naive_list(
        (size_of, keys) in (1u64..40).prop_flat_map(|n| {
            (prop::collection::vec(1u32..=16, n as usize), prop::collection::vec(0..n, 1..400))
        }),
        capacity in 1u64..=64,
    ) {
        matches_naive_list("lru", false, &size_of, &keys, capacity)?;
        matches_naive_list("mru", true, &size_of, &keys, capacity)?;
    }

    #[test]
    fn opt_misses_no_more_than_any_policy_with_unit_sizes(
        keys in prop::collection::vec(0u64..32, 1..400),
        capacity in 1u64..=24,
    ) {
        // Fill next_access with a backwards pass over the trace.
        let mut trace: Vec<Access> = keys.iter().enumerate().map(|(t, &k)| access(k, 1, t as u64)).collect();
        let mut next_seen = std::collections::HashMap::new();
        for a in trace.iter_mut().rev() {
            a.next_access = next_seen.insert(a.key, a.vtime).unwrap_or(NEVER);
        }
        let misses = |name: &str| {
            let mut policy = hearth_policy::build(name, capacity).unwrap();
            let mut evicted = Vec::new();
            trace.iter().filter(|a| !policy.access(a, &mut evicted)).count()
        };
        let opt = misses("opt");
        // BeladySize refuses items never requested again, which can beat
        // demand-paging OPT (see ADMISSION_SPECS).
        for name in all_specs().into_iter().filter(|n| !n.starts_with("beladysize")) {
            let theirs = misses(name);
            prop_assert!(opt <= theirs, "OPT missed {} times, {} only {} (capacity {})", opt, name, theirs, capacity);
        }
    }
}

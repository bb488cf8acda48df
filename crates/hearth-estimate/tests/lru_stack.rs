//! `for_each_reuse`'s stack distances and the LRU policy are written
//! independently; Mattson's stack property ties them together, so each checks
//! the other: LRU with c unit slots hits exactly the re-accesses whose stack
//! distance is below c.

use hearth_core::{Access, Op};
use proptest::prelude::*;

fn accesses(keys: &[u64]) -> Vec<Access> {
    keys.iter()
        .enumerate()
        .map(|(i, &key)| Access { key, size: 1, vtime: i as u64, next_access: 0, op: Op::Read, ctx: 0 })
        .collect()
}

proptest! {
    #[test]
    fn lru_hits_equal_reuses_within_capacity(keys in prop::collection::vec(0u64..40, 1..600), cap in 1u64..48) {
        let acc = accesses(&keys);
        let mut predicted = 0;
        hearth_estimate::for_each_reuse(&acc, |_, reuse| {
            if matches!(reuse, Some((d, _)) if d < cap) {
                predicted += 1;
            }
        });
        let mut lru = hearth_policy::build("lru", cap).unwrap();
        let mut ev = Vec::new();
        let hits = acc.iter().filter(|a| lru.access(a, &mut ev)).count();
        prop_assert_eq!(hits, predicted);
    }
}

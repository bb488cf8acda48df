//! Reuse distances of a whole access sequence, exact: what the analyzer
//! reports and warmup's re-access study groups by.

use hearth_core::{key_map, Access, Fenwick};

/// Calls `on_access(i, reuse)` for every access in order, where `reuse` is
/// `Some((stack_distance, temporal_distance))` for a re-access and `None` for
/// a first access. The stack distance counts the distinct other keys used
/// since the previous use, so an LRU cache of `c` unit items hits exactly the
/// re-accesses with stack distance `< c`.
pub fn for_each_reuse(accesses: &[Access], mut on_access: impl FnMut(usize, Option<(u64, u64)>)) {
    let mut last = key_map::<u64>(accesses.len() / 4);
    // A 1 at position t marks "t is the latest access of its key"; the marks
    // strictly between two uses of a key count the distinct keys in between.
    let mut marks = Fenwick::new(accesses.len());
    for (i, a) in accesses.iter().enumerate() {
        let t = i as u64;
        let reuse = last.insert(a.key, t).map(|prev| {
            let between = marks.prefix(t) - marks.prefix(prev + 1);
            marks.add(prev, -1);
            (between, t - prev)
        });
        marks.add(t, 1);
        on_access(i, reuse);
    }
}

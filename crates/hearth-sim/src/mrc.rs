//! One-pass miss-ratio curves over a trace: the exact LRU curve from stack
//! distances ([`exact_pass`]) and SHARDS's estimate ([`shards_pass`]). The
//! estimators themselves are `hearth_estimate::mrc`'s, re-exported here.

use hearth_core::Access;

use crate::source::{SourceError, Streamed};
use crate::stream::run_pipelined;
use crate::SimResult;

mod shards;
pub use hearth_estimate::mrc::{Shards, ShardsMode, StackDistances, HOT_KEYS, TRUSTED_SAMPLE_KEYS};
pub use shards::{hot_keys, shards_pass, ShardsCurve, HOT_KEYS_FROM};

/// The exact LRU results of `trace` at each of `cache_bytes` (in that
/// order), from one pass. An oracleGeneral file is read through the
/// sampled reader keeping every key, a batch at a time on this thread: its
/// records decode in place in the read buffer, at a fraction of the cost of
/// the general reader's per-record dispatch and of handing chunks to
/// another thread. Other traces cost about as much to decode as the pass
/// itself, so another thread decodes them. `progress` receives accesses
/// read.
pub fn exact_pass(
    trace: &Streamed,
    cache_bytes: &[u64],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<SimResult>, SourceError> {
    let mut sd = if trace.records_next_access() {
        StackDistances::with_next_uses(cache_bytes)
    } else {
        StackDistances::new(cache_bytes)
    };
    let mut consume = |batch: &[Access]| {
        sd.access_all(batch);
        progress(batch.len() as u64);
    };
    if trace.source().decodes_oracle_in_place(trace.mode) {
        trace.sampled_accesses(u64::MAX)?.for_each_batch(|batch| consume(batch.accesses))?;
    } else {
        run_pipelined(trace.accesses()?, consume)?;
    }
    Ok(sd.results())
}

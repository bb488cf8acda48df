//! A setting as a person wrote it that cannot be used: a cache size, a
//! warm-up, a mode (parsed by `hearth-sim`) or an estimator's sampling
//! rate. Plain data, so the simulator, the server and the front ends share
//! one type.

use hearth_core::ValueError;

/// A setting as a person wrote it that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingError {
    #[error(transparent)]
    Value(#[from] ValueError),
    #[error("bad percentage {input:?}")]
    Percentage { input: String },
    #[error("cache size {input:?} must be a share in (0%, 100%]")]
    ShareOutOfRange { input: String },
    #[error("bad block count {input:?}")]
    BlockCount { input: String },
    #[error("range {item:?} needs a step: A..B/STEP")]
    RangeWithoutStep { item: String },
    #[error("range {item:?} is empty")]
    EmptyRange { item: String },
    #[error("no cache sizes given")]
    NoSizes,
    #[error("cache sizes in blocks need block mode (object traces have no block size)")]
    BlocksWithoutBlockMode,
    #[error("bad object count {input:?}")]
    ObjectCount { input: String },
    #[error(
        "cache size {size} counts objects, so every object must count as one: add --ignore-obj-size \
         (libCacheSim's), or use bytes or a share of the footprint"
    )]
    ObjectsWithSizes { size: String },
    #[error("cache size {size} is zero bytes")]
    ZeroBytes { size: String },
    #[error("cache size {input:?} has no unit: write {hint}")]
    NoUnit { input: String, hint: String },
    #[error("cache size {size} holds no {block} block: give a unit (as {bytes}MiB) or blocks ({bytes}blocks)")]
    BelowOneBlock { size: String, block: String, bytes: u64 },
    #[error("bad percentage {input:?}: {reason}")]
    WarmupPercentage { input: String, reason: String },
    #[error("warm-up share {input:?} must be in [0%, 100%)")]
    WarmupShare { input: String },
    #[error("{input:?} is neither a count of requests nor a share like 10%")]
    Warmup { input: String },
    #[error("mode must be 'block' or 'object', not {input:?}")]
    Mode { input: String },
    #[error("sampling rate {rate} is not in (0, 1]")]
    SamplingRate { rate: f64 },
    #[error("a SHARDS sample needs room for at least one item")]
    EmptySample,
}

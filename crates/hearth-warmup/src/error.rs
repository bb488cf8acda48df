//! Why a warm-up experiment or its synthetic workload could not run.

#[derive(Debug, Clone, thiserror::Error)]
pub enum WarmupError {
    #[error("region size {region} is not a positive multiple of the block size {block_size}")]
    Region { region: u64, block_size: u32 },
    #[error("a period of {period} holds more than {max} intervals of {interval}; use a longer interval")]
    TooManyIntervals { period: String, interval: String, max: u64 },
    #[error(
        "the trace covers {periods} whole period(s) of {period_secs} s; warmup needs one period of history and one to evaluate"
    )]
    TooFewPeriods { periods: usize, period_secs: u64 },
    #[error("unknown warmup method {name:?} (known: {known})")]
    UnknownMethod { name: String, known: String },
    /// The daily-Zipf workload's settings; `reason` says which.
    #[error("{reason}")]
    Workload { reason: String },
}

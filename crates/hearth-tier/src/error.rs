//! Why a tiering experiment, plan or device file could not be used. File
//! problems name the file; settings name the setting.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TierError {
    /// A file that could not be read, written or parsed; `reason` says why.
    #[error("{}: {reason}", file.display())]
    File { file: PathBuf, reason: String },
    #[error("{origin}: device {name:?}: bytes_per_sec must be positive")]
    DeviceSpeed { origin: String, name: String },
    #[error("unknown device {name:?} (known: {known})")]
    UnknownDevice { name: String, known: String },
    #[error("unknown scheme {name:?}: use slow, lru, freq or borg")]
    UnknownScheme { name: String },
    #[error("unknown partitioner {name:?}: use freq or borg")]
    UnknownPartitioner { name: String },
    #[error("the training share must be in [0, 1], got {share}")]
    TrainingShare { share: f64 },
    #[error("the trace has no reads or writes")]
    EmptyTrace,
    #[error("block size must be positive")]
    ZeroBlockSize,
    #[error("correlation-directed prefetching needs an access graph")]
    CdpWithoutGraph,
    /// The synthetic chains workload's settings; `reason` says which.
    #[error("chains workload: {reason}")]
    Chains { reason: String },
    #[error("{}: the runs hold {total} blocks, more than capacity_blocks = {capacity}", file.display())]
    PlanOverCapacity { file: PathBuf, total: u64, capacity: u64 },
}

impl TierError {
    pub(crate) fn file(file: &std::path::Path, reason: impl ToString) -> TierError {
        TierError::File { file: file.to_path_buf(), reason: reason.to_string() }
    }
}

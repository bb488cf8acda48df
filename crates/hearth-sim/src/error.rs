//! Why a client/storage hierarchy could not be simulated. A setting as
//! written that cannot be used is `hearth_estimate::SettingError`
//! (re-exported at the crate's root); trace problems are
//! `hearth_trace::TraceError`, which names the file and the place in it.

use hearth_placement::UntrackableBuffer;

/// Why a client/storage cache hierarchy could not be simulated.
#[derive(Debug, thiserror::Error)]
pub enum HierarchyError {
    #[error(transparent)]
    Buffer(#[from] UntrackableBuffer),
    #[error("DEMOTE needs the client's evicted blocks, which a storage-level trace does not record")]
    DemoteWithoutEvictions,
    #[error("block size {bytes} is too large")]
    BlockSize { bytes: u64 },
    #[error(transparent)]
    Trace(#[from] hearth_trace::TraceError),
    /// Boxed: a trace source's errors are large, and results carry this.
    #[error(transparent)]
    Source(Box<crate::source::SourceError>),
}

impl From<crate::source::SourceError> for HierarchyError {
    fn from(e: crate::source::SourceError) -> Self {
        HierarchyError::Source(Box::new(e))
    }
}

//! Why a prefetcher spec or a prefetching set-up was refused.

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PrefetchError {
    #[error("unknown prefetcher {name:?} (known: {known})")]
    UnknownPrefetcher { name: String, known: String },
    #[error("prefetcher parameter {piece:?} is not key=value")]
    NotKeyValue { piece: String },
    #[error("prefetcher {scheme} has no parameter {key:?} (known: {known})")]
    UnknownParameter { scheme: String, key: String, known: String },
    #[error("prefetcher {scheme}: bad value {value:?} for {key:?}")]
    BadValue { scheme: String, key: String, value: String },
    /// A value out of range: `what` is the prefetcher or setting.
    #[error("{what}: {reason}")]
    OutOfRange { what: &'static str, reason: String },
}

impl PrefetchError {
    pub(crate) fn range(what: &'static str, reason: impl Into<String>) -> PrefetchError {
        PrefetchError::OutOfRange { what, reason: reason.into() }
    }
}

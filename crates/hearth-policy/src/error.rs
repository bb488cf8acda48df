//! Why a policy spec (`mq:m=8`, `lru+prob:p=0.5`) was refused. Every message
//! names the policy and the parameter, and lists what is known where a name
//! was not.

use hearth_core::ValueError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("unknown policy {name:?} (known: {known})")]
    UnknownPolicy { name: String, known: String },
    #[error("unknown admission policy {name:?} (known: {known})")]
    UnknownAdmission { name: String, known: String },
    #[error("{text:?} names {count} policies where one is expected")]
    NotOne { text: String, count: usize },
    #[error("{piece:?} gives a second admission policy (one spec takes at most one +admission)")]
    TwoAdmissions { piece: String },
    #[error("policy parameter {piece:?} is not key=value")]
    NotKeyValue { piece: String },
    #[error("policy {policy} takes no parameters (got {key:?})")]
    TakesNoParameters { policy: String, key: String },
    #[error("policy {policy} has no parameter {key:?} (known: {known})")]
    UnknownParameter { policy: String, key: String, known: String },
    #[error("{owner}: bad value {value:?} for parameter {key:?}")]
    BadValue { owner: String, key: String, value: String },
    /// The size's own message is in this one's, so it is not a `source`
    /// (a chain printer would repeat it).
    #[error("{owner}: parameter {key:?}: {error}")]
    BadSize { owner: String, key: &'static str, error: ValueError },
    /// A value out of the policy's range: `reason` says which and why.
    #[error("{policy}: {reason}")]
    OutOfRange { policy: &'static str, reason: String },
}

impl SpecError {
    pub(crate) fn range(policy: &'static str, reason: impl Into<String>) -> SpecError {
        SpecError::OutOfRange { policy, reason: reason.into() }
    }
}

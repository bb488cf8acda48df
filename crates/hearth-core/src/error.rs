//! Why a size, duration or share written by a person was refused. The
//! message names the value as written and, where there is one, the fix.

/// A value from a flag or config file that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("{what} {input:?} is negative")]
    Negative { what: &'static str, input: String },
    #[error("not a {what}: {input:?}{hint}")]
    NotANumber { what: &'static str, input: String, hint: &'static str },
    /// A bare number where a duration is expected: seconds or milliseconds?
    #[error("duration {input:?} has no unit: use {as_seconds} or {as_millis}")]
    NoUnit { input: String, as_seconds: String, as_millis: String },
    #[error("unknown {what} unit {unit:?} in {input:?}{hint}")]
    UnknownUnit { what: &'static str, unit: String, input: String, hint: &'static str },
    #[error("{what} {input:?} is out of range")]
    OutOfRange { what: &'static str, input: String },
    /// A rate without its `/s`: a bare number, or a size.
    #[error("rate {input:?} has no unit: write {hint}")]
    NoRateUnit { input: String, hint: String },
    #[error("{input:?} is not a percentage (write it with %, e.g. 30%)")]
    NoPercentSign { input: String },
    #[error("{input:?} must be between 0% and 100%")]
    PercentOutOfRange { input: String },
}

//! A prefetcher spec, parsed once at the edge (command line, configuration
//! file) and carried typed: `seq`, `quickmine:g=5,degree=3`. Its text is
//! split by `hearth_policy::spec::split_single`, the one splitter of spec
//! text; its scheme, parameter names and values are checked against its
//! [`SCHEMES`] row when it is parsed, without building the prefetcher.

use std::fmt;
use std::str::FromStr;

use hearth_core::CtxEvent;

use hearth_policy::param::Refusal;

use crate::{build_scheme, relation, Params, PrefetchError, Prefetcher, SCHEMES};

/// A scheme of [`SCHEMES`] (by row) and its `key=value` parameters as
/// written. `Display` writes it back in the form it parses from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PrefetchSpec {
    row: usize,
    pairs: Vec<(String, String)>,
}

impl PrefetchSpec {
    /// The scheme's registry name (`quickmine` for `QuickMine:g=3`).
    pub fn name(&self) -> &'static str {
        SCHEMES[self.row].0
    }

    /// The prefetcher, for blocks of `block_size` bytes; `training` is the
    /// warm-up part of the trace (offline miners learn from it). It fails
    /// only on what the spec alone cannot tell: a cache too small for it.
    pub fn build(&self, block_size: u32, training: &[CtxEvent]) -> Result<Box<dyn Prefetcher>, PrefetchError> {
        let params = Params { scheme: self.to_string(), pairs: &self.pairs };
        build_scheme(self.name(), &params, block_size, training)
    }
}

impl FromStr for PrefetchSpec {
    type Err = PrefetchError;
    fn from_str(text: &str) -> Result<PrefetchSpec, PrefetchError> {
        let (name, pairs) =
            hearth_policy::spec::split_single(text).map_err(|piece| PrefetchError::NotKeyValue { piece })?;
        let row = SCHEMES.iter().position(|s| s.0 == name).ok_or_else(|| {
            let names: Vec<&str> = SCHEMES.iter().map(|s| s.0).collect();
            PrefetchError::UnknownPrefetcher { name: name.clone(), known: names.join(", ") }
        })?;
        let (scheme, declared) = (SCHEMES[row].0, SCHEMES[row].1);
        for (key, value) in &pairs {
            let Some(param) = declared.iter().find(|p| p.name == key) else {
                let known: Vec<&str> = declared.iter().map(|p| p.name).collect();
                return Err(PrefetchError::UnknownParameter {
                    scheme: text.trim().to_string(),
                    key: key.clone(),
                    known: known.join(", "),
                });
            };
            param.check(value).map_err(|refusal| match refusal {
                Refusal::NotOfType => {
                    PrefetchError::BadValue { scheme: text.trim().to_string(), key: key.clone(), value: value.clone() }
                }
                Refusal::OutOfRange(reason) => PrefetchError::OutOfRange { what: scheme, reason },
            })?;
        }
        relation(scheme, &Params { scheme: text.trim().to_string(), pairs: &pairs })?;
        Ok(PrefetchSpec { row, pairs })
    }
}

impl fmt::Display for PrefetchSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = self.name().to_string();
        for (i, (key, value)) in self.pairs.iter().enumerate() {
            text.push_str(if i == 0 { ":" } else { "," });
            text.push_str(&format!("{key}={value}"));
        }
        f.pad(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip_and_names_are_checked_when_parsed() {
        let spec: PrefetchSpec = " QuickMine : g = 3 , degree=2".parse().unwrap();
        assert_eq!((spec.name(), spec.to_string()), ("quickmine", "quickmine:g=3,degree=2".to_string()));
        assert_eq!(spec.to_string().parse::<PrefetchSpec>().unwrap(), spec);
        let err = |text: &str| text.parse::<PrefetchSpec>().unwrap_err().to_string();
        assert_eq!(err("seq:depth=3"), "prefetcher seq:depth=3 has no parameter \"depth\" (known: max)");
        assert_eq!(err("seq:max"), "prefetcher parameter \"max\" is not key=value");
        assert!(err("nope").starts_with("unknown prefetcher \"nope\" (known: none, seq,"), "{}", err("nope"));
    }

    /// A spec the rows accept builds; one they refuse the constructors
    /// refuse too, but for values the rows are stricter on (non-finite
    /// numbers). Whole numbers past 2^20 are not tried: some prefetchers
    /// reserve that much up front (BORG's window).
    #[test]
    fn rows_accept_what_the_constructors_accept() {
        let mut tried = 0;
        for (row, (name, params, _)) in SCHEMES.iter().enumerate() {
            for param in *params {
                let values = param.probes().into_iter().filter(|v| v.parse::<u64>().map_or(true, |n| n <= 1 << 20));
                for value in values {
                    let spec = PrefetchSpec { row, pairs: vec![(param.name.to_string(), value.clone())] };
                    let text = spec.to_string();
                    let (by_row, by_constructor) = (text.parse::<PrefetchSpec>(), spec.build(4096, &[]));
                    let finite = value.parse::<f64>().map_or(true, f64::is_finite);
                    if by_row.is_ok() || finite {
                        assert_eq!(by_row.is_ok(), by_constructor.is_ok(), "{name}: {text}: {by_row:?}");
                    }
                    tried += 1;
                }
            }
        }
        assert!(tried > 500, "{tried} specs tried");
    }
}

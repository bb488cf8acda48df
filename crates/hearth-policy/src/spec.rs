//! A policy spec, parsed once: `lru`, `mq:m=8,lifetime=5000`,
//! `arc+prob:p=0.5,seed=1`. This module is the only place a spec's text is
//! split; everything after the edge (command line, configuration file,
//! Python call) holds a [`PolicySpec`], whose registry rows say what the
//! policy is (offline, its family) and whose parameters were checked when it
//! was parsed, so building it cannot fail.
//!
//! Prefetcher specs (`hearth_prefetch::PrefetchSpec`) are split here too,
//! by [`split_single`].
//!
//! Grammar: a list is comma-separated specs; a spec is
//! `name[:key=value,...][+admission[:key=value,...]]`, names case-blind. In a
//! list, a piece with `=` but no `:` is one more parameter of the part before
//! it when that part has a `:` (`lru,mq:m=8,lifetime=5000` is `lru` and
//! `mq:m=8,lifetime=5000`), and a group name (`classic`, `modern`, `learned`, `all`)
//! stands for its policies.

use std::fmt;
use std::str::FromStr;

use hearth_core::Policy;

use crate::admission::{self, AdmitEntry, ADMISSIONERS};
use crate::param::{Param, Refusal};
use crate::{Entry, Group, SpecError, REGISTRY};

/// The `key=value` parameters of one part of a spec, as written (trimmed).
#[derive(Debug, Default, Clone, PartialEq, Eq, Hash)]
pub struct Params {
    /// The policy (`mq`) or admissioner (`+prob`) they belong to, for messages.
    owner: &'static str,
    pairs: Vec<(String, String)>,
}

impl Params {
    /// The value of `key` parsed as `T`, or `default` if absent.
    pub fn get<T: FromStr>(&self, key: &str, default: T) -> Result<T, SpecError> {
        match self.pairs.iter().find(|(k, _)| k == key) {
            None => Ok(default),
            Some((_, v)) => v.parse().map_err(|_| SpecError::BadValue {
                owner: self.owner.to_string(),
                key: key.to_string(),
                value: v.clone(),
            }),
        }
    }

    /// Adds one `key=value` piece.
    fn push(&mut self, piece: &str) -> Result<(), SpecError> {
        let pair = key_value(piece).ok_or_else(|| SpecError::NotKeyValue { piece: piece.to_string() })?;
        self.pairs.push(pair);
        Ok(())
    }

    /// Refuses a key `policy`'s row does not declare, and a value the
    /// declaration does not accept.
    fn check(&self, policy: &str, declared: &[Param]) -> Result<(), SpecError> {
        for (key, value) in &self.pairs {
            let Some(param) = declared.iter().find(|p| p.name == key) else {
                if declared.is_empty() {
                    return Err(SpecError::TakesNoParameters { policy: policy.to_string(), key: key.clone() });
                }
                let known: Vec<&str> = declared.iter().map(|p| p.name).collect();
                return Err(SpecError::UnknownParameter {
                    policy: policy.to_string(),
                    key: key.clone(),
                    known: known.join(", "),
                });
            };
            param.check(value).map_err(|refusal| match refusal {
                Refusal::NotOfType => {
                    SpecError::BadValue { owner: self.owner.to_string(), key: key.clone(), value: value.clone() }
                }
                Refusal::OutOfRange(reason) => SpecError::OutOfRange { policy: self.owner, reason },
            })?;
        }
        Ok(())
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in self.pairs.iter().enumerate() {
            write!(f, "{}{k}={v}", if i == 0 { "" } else { "," })?;
        }
        Ok(())
    }
}

/// One part of a spec: a registry row (by index) and its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Part {
    row: usize,
    params: Params,
}

/// A part as parsed, and whether its text gave a `:`, so that a following
/// `key=value` piece of a list belongs to it.
type Parsed = (Part, bool);

impl Part {
    /// `name[:key=value]` of an eviction policy.
    fn eviction(text: &str) -> Result<Parsed, SpecError> {
        let (name, first) = split_name(text);
        let row = REGISTRY
            .iter()
            .position(|e| e.name == name)
            .ok_or_else(|| SpecError::UnknownPolicy { name, known: crate::names().join(", ") })?;
        Part::with_params(row, REGISTRY[row].name, first)
    }

    /// `name[:key=value]` of an admissioner (aliases allowed).
    fn admission(text: &str) -> Result<Parsed, SpecError> {
        let (name, first) = split_name(text);
        let row = ADMISSIONERS
            .iter()
            .position(|e| e.name == name || e.aliases.contains(&name.as_str()))
            .ok_or_else(|| SpecError::UnknownAdmission { name, known: crate::admission_names().join(", ") })?;
        Part::with_params(row, ADMISSIONERS[row].plus, first)
    }

    fn with_params(row: usize, owner: &'static str, first: Option<&str>) -> Result<Parsed, SpecError> {
        let mut part = Part { row, params: Params { owner, pairs: Vec::new() } };
        if let Some(kv) = first.filter(|kv| !kv.trim().is_empty()) {
            part.params.push(kv)?;
        }
        Ok((part, first.is_some()))
    }
}

/// `key=value` as (key, value), each trimmed.
fn key_value(piece: &str) -> Option<(String, String)> {
    let (k, v) = piece.split_once('=')?;
    Some((k.trim().to_string(), v.trim().to_string()))
}

/// A spec with no list or admission grammar around it, `name[:key=value,...]`
/// (a prefetcher's, `quickmine:g=5,degree=3`): its name (trimmed, lower
/// case) and its `key=value` pairs (trimmed), for crates whose registries
/// are not policies' to split their specs here too. `Err` holds the piece
/// that is not `key=value`.
pub fn split_single(text: &str) -> Result<(String, Vec<(String, String)>), String> {
    let (name, rest) = split_name(text);
    let pieces = rest.unwrap_or("").split(',').filter(|piece| !piece.trim().is_empty());
    let pairs = pieces.map(|piece| key_value(piece).ok_or_else(|| piece.to_string())).collect::<Result<_, _>>()?;
    Ok((name, pairs))
}

/// `name` (trimmed, lower case) and what follows its `:`, if any.
fn split_name(text: &str) -> (String, Option<&str>) {
    let (name, rest) = match text.split_once(':') {
        Some((name, rest)) => (name, Some(rest)),
        None => (text, None),
    };
    (name.trim().to_ascii_lowercase(), rest)
}

/// A replacement policy, optionally behind an admission policy, with checked
/// parameters. `Display` writes it back in the form it parses from
/// (`mq:m=8+prob:p=0.5`), names in their registry spelling.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PolicySpec {
    eviction: Part,
    /// Boxed: most specs have none, and command-line structs hold specs.
    admission: Option<Box<Part>>,
}

impl PolicySpec {
    /// The registry row of the eviction policy.
    fn entry(&self) -> &'static Entry {
        &REGISTRY[self.eviction.row]
    }

    fn admitter(&self) -> Option<(&'static AdmitEntry, &Params)> {
        self.admission.as_ref().map(|a| (&ADMISSIONERS[a.row], &a.params))
    }

    /// A spec of the registered policy `name` with its default parameters.
    fn of_row(row: usize) -> PolicySpec {
        PolicySpec {
            eviction: Part { row, params: Params { owner: REGISTRY[row].name, pairs: Vec::new() } },
            admission: None,
        }
    }

    /// The eviction policy's registry name (`mq` for `mq:m=8+tinylfu`).
    pub fn name(&self) -> &'static str {
        self.entry().name
    }

    /// Whether the policy reads `Access::next_access` (OPT, BeladySize), so
    /// its driver must supply each access's next use.
    pub fn is_offline(&self) -> bool {
        self.entry().offline
    }

    /// The family of its eviction policy, for grouping results (see
    /// [`families`](crate::families)).
    pub fn family(&self) -> &'static str {
        self.entry().family
    }

    /// The policy at `capacity` bytes. The parameters were checked when the
    /// spec was parsed, and no check depends on the capacity.
    pub fn build(&self, capacity: u64) -> Box<dyn Policy> {
        self.try_build(capacity).expect("a policy spec's parameters are checked when it is parsed")
    }

    fn try_build(&self, capacity: u64) -> Result<Box<dyn Policy>, SpecError> {
        let policy = (self.entry().build)(capacity, &self.eviction.params)?;
        match self.admitter() {
            Some((entry, params)) => admission::wrap(policy, entry, params),
            None => Ok(policy),
        }
    }

    /// Refuses unknown parameters and values out of range by reading the
    /// registry rows, without building anything.
    fn check(&self) -> Result<(), SpecError> {
        let entry = self.entry();
        self.eviction.params.check(entry.name, entry.params)?;
        if let Some(relation) = entry.relation {
            relation(&self.eviction.params)?;
        }
        if let Some((entry, params)) = self.admitter() {
            params.check(entry.name, entry.params)?;
        }
        Ok(())
    }

    /// How a result row names this policy, given `built`, the name of the
    /// policy built from it: that name with the parameters the spec gives
    /// after the part they belong to, so `mq` and `mq:m=4` are told apart
    /// (`MQ`, `MQ:m=4`, `LRU+prob:p=0.3`).
    pub fn label(&self, built: &str) -> String {
        let admits = self.admitter().map(|(entry, _)| entry.name);
        let evicts = admits.and_then(|a| built.strip_suffix(&format!("+{a}"))).unwrap_or(built);
        let mut out = evicts.to_string();
        if !self.eviction.params.pairs.is_empty() {
            out = format!("{out}:{}", self.eviction.params);
        }
        if let Some((entry, params)) = self.admitter() {
            out = format!("{out}+{}", entry.name);
            if !params.pairs.is_empty() {
                out = format!("{out}:{params}");
            }
        }
        out
    }

    /// The last part of the spec, which a following `key=value` piece extends.
    fn last_part(&mut self) -> &mut Part {
        self.admission.as_deref_mut().unwrap_or(&mut self.eviction)
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = self.entry().name.to_string();
        if !self.eviction.params.pairs.is_empty() {
            text = format!("{text}:{}", self.eviction.params);
        }
        if let Some((entry, params)) = self.admitter() {
            text = format!("{text}+{}", entry.name);
            if !params.pairs.is_empty() {
                text = format!("{text}:{params}");
            }
        }
        // `pad`, so a table's `{:<width$}` lines specs up.
        f.pad(&text)
    }
}

/// One spec: `lru`, `mq:m=8,lifetime=5000`; a list or a group is refused.
impl FromStr for PolicySpec {
    type Err = SpecError;
    fn from_str(text: &str) -> Result<PolicySpec, SpecError> {
        let mut specs = parse_list(text)?;
        match specs.len() {
            1 => Ok(specs.remove(0)),
            count => Err(SpecError::NotOne { text: text.trim().to_string(), count }),
        }
    }
}

/// The specs a comma-separated list stands for (see the module doc), each
/// checked: `lru,mq:m=8,lifetime=5000`, `classic,lru+tinylfu`.
pub fn parse_list(text: &str) -> Result<Vec<PolicySpec>, SpecError> {
    let mut specs: Vec<PolicySpec> = Vec::new();
    // Whether the last spec's last part may take a following `key=value`.
    let mut open = false;
    for piece in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (head, admission) = match piece.split_once('+') {
            Some((head, admission)) => (head, Some(admission)),
            None => (piece, None),
        };
        let continues = open && head.contains('=') && !head.contains(':');
        if !continues && admission.is_none() {
            if let Some(rows) = group_rows(&head.to_ascii_lowercase()) {
                specs.extend(rows.into_iter().map(PolicySpec::of_row));
                open = false;
                continue;
            }
        }
        let spec = if continues {
            let spec = specs.last_mut().expect("a list is open only after a spec");
            spec.last_part().params.push(head)?;
            if admission.is_some() && spec.admission.is_some() {
                return Err(SpecError::TwoAdmissions { piece: piece.to_string() });
            }
            spec
        } else {
            let (eviction, has_params) = Part::eviction(head)?;
            open = has_params;
            specs.push(PolicySpec { eviction, admission: None });
            specs.last_mut().expect("just pushed")
        };
        if let Some(admission) = admission {
            let (admission, has_params) = Part::admission(admission)?;
            open = has_params;
            spec.admission = Some(Box::new(admission));
        }
    }
    for spec in &specs {
        spec.check()?;
    }
    Ok(specs)
}

/// A comma-separated list of specs, as one command-line value holds it
/// (see [`parse_list`]); a repeated option gives several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyList(pub Vec<PolicySpec>);

impl FromStr for PolicyList {
    type Err = SpecError;
    fn from_str(text: &str) -> Result<PolicyList, SpecError> {
        parse_list(text).map(PolicyList)
    }
}

impl PolicyList {
    /// Every list's specs, in order.
    pub fn concat(lists: &[PolicyList]) -> Vec<PolicySpec> {
        lists.iter().flat_map(|list| list.0.iter().cloned()).collect()
    }
}

/// The groups a policy list may name, each with its policies in order.
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    ["classic", "modern", "learned", "all"]
        .into_iter()
        .map(|group| {
            let rows = group_rows(group).expect("a known group");
            (group, rows.into_iter().map(|row| REGISTRY[row].name).collect())
        })
        .collect()
}

/// The rows of a group, in the order it lists them: `classic` (LRU … MQ,
/// then OPT, as Hearth started), `modern` (every other policy that does not
/// learn, registry order), `learned` (those that train a model), `all`
/// (registry order).
fn group_rows(name: &str) -> Option<Vec<usize>> {
    let rows = 0..REGISTRY.len();
    match name {
        "classic" => {
            let mut classic: Vec<(u8, usize)> = rows
                .filter_map(|row| match REGISTRY[row].group {
                    Group::Classic(rank) => Some((rank, row)),
                    Group::Modern | Group::Learned => None,
                })
                .collect();
            classic.sort_unstable();
            Some(classic.into_iter().map(|(_, row)| row).collect())
        }
        "modern" => Some(rows.filter(|&row| REGISTRY[row].group == Group::Modern).collect()),
        "learned" => Some(rows.filter(|&row| REGISTRY[row].group == Group::Learned).collect()),
        "all" => Some(rows.collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a row accepts is what the constructor accepts, so that
    /// [`PolicySpec::build`] never meets a refusal the parse let through.
    #[test]
    fn rows_accept_what_the_constructors_accept() {
        let mut tried = 0;
        let mut agree = |spec: PolicySpec| {
            let (by_row, by_constructor) = (spec.check(), spec.try_build(0));
            assert_eq!(
                by_row.is_ok(),
                by_constructor.is_ok(),
                "{spec}: row {by_row:?}, constructor {by_constructor:?}",
                by_constructor = by_constructor.as_ref().err()
            );
            tried += 1;
        };
        for (row, entry) in REGISTRY.iter().enumerate() {
            agree(PolicySpec::of_row(row));
            for param in entry.params {
                for value in param.probes() {
                    let mut spec = PolicySpec::of_row(row);
                    spec.eviction.params.pairs.push((param.name.to_string(), value));
                    agree(spec);
                }
            }
        }
        for (row, entry) in ADMISSIONERS.iter().enumerate() {
            for param in entry.params {
                for value in param.probes() {
                    let pairs = vec![(param.name.to_string(), value)];
                    let admission = Part { row, params: Params { owner: entry.plus, pairs } };
                    agree(PolicySpec { admission: Some(Box::new(admission)), ..PolicySpec::of_row(0) });
                }
            }
        }
        assert!(tried > 1000, "{tried} specs tried");
    }

    #[test]
    fn relations_across_parameters_are_checked_with_defaults_filled_in() {
        let err = |text: &str| text.parse::<PolicySpec>().unwrap_err().to_string();
        assert_eq!(err("fbr:new=0.9"), "fbr: needs new > 0, old > 0 and new + old <= 1, got new=0.9, old=0.25");
        assert_eq!(
            err("fifomerge:keep=100"),
            "fifomerge: exam must be at least 1 and keep below it, got exam=100, keep=100"
        );
        assert_eq!(err("arc:step=bytes"), "arc: step must be \"byte\" or \"size\", got \"bytes\"");
        assert!("fbr:new=0.5,old=0.5,amax=9,cmax=10".parse::<PolicySpec>().is_ok());
    }
}

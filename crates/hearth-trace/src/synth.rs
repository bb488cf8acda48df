//! Small synthetic block workloads, deterministic from a seed: Zipf, uniform,
//! one-pass scans, loops and weighted mixes of them. Each request reads (or
//! writes) one whole block.
//!
//! ```
//! use hearth_trace::synth::{Pattern, Synth};
//! let reqs: Vec<_> = Synth::new(Pattern::Zipf { blocks: 1000, alpha: 0.9 }, 42).unwrap().take(10).collect();
//! assert_eq!(reqs.len(), 10);
//! ```

use std::fmt;
use std::str::FromStr;

use hearth_core::Op;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::{Request, SettingError};

/// Which blocks a workload touches, in block numbers.
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// Block `r - 1` with probability proportional to `1 / r^alpha`
    /// (r = 1..=blocks): block 0 is the hottest.
    Zipf { blocks: u64, alpha: f64 },
    /// Every block of `0..blocks` equally likely.
    Uniform { blocks: u64 },
    /// `start, start + 1, ...`: a scan that never revisits a block.
    Scan { start: u64 },
    /// `0, 1, ..., blocks - 1` over and over.
    Loop { blocks: u64 },
    /// Each request comes from one part, picked with probability
    /// proportional to its weight. Requests of part `i` get client `i`.
    Mix(Vec<Part>),
}

/// One component of a [`Pattern::Mix`].
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub weight: f64,
    /// Added to the part's block numbers, to place parts in disjoint ranges
    /// (or to overlap them on purpose).
    pub first_block: u64,
    pub pattern: Pattern,
}

/// An endless, deterministic stream of synthetic [`Request`]s; use `.take(n)`.
pub struct Synth {
    source: Source,
    rng: Xoshiro256PlusPlus,
    block_size: u32,
    interarrival_ns: u64,
    write_fraction: f64,
    issued: u64,
}

/// Sampling state of a [`Pattern`].
enum Source {
    Zipf(Zipf<f64>),
    Uniform(u64),
    Scan { next: u64 },
    Loop { blocks: u64, next: u64 },
    Mix { cumulative: Vec<f64>, parts: Vec<(u64, Source)> },
}

impl Source {
    fn new(pattern: &Pattern) -> Result<Source, SettingError> {
        Ok(match *pattern {
            Pattern::Zipf { blocks, alpha } => {
                if blocks == 0 {
                    return Err(SettingError::NoBlocks { kind: "zipf" });
                }
                Source::Zipf(
                    Zipf::new(blocks as f64, alpha)
                        .map_err(|e| SettingError::Distribution { distribution: "zipf", reason: e.to_string() })?,
                )
            }
            Pattern::Uniform { blocks: 0 } => return Err(SettingError::NoBlocks { kind: "uniform" }),
            Pattern::Uniform { blocks } => Source::Uniform(blocks),
            Pattern::Scan { start } => Source::Scan { next: start },
            Pattern::Loop { blocks: 0 } => return Err(SettingError::NoBlocks { kind: "loop" }),
            Pattern::Loop { blocks } => Source::Loop { blocks, next: 0 },
            Pattern::Mix(ref parts) => {
                if parts.is_empty() {
                    return Err(SettingError::EmptyMix);
                }
                let mut total = 0.0;
                let mut cumulative = Vec::with_capacity(parts.len());
                let mut sources = Vec::with_capacity(parts.len());
                for part in parts {
                    if !(part.weight.is_finite() && part.weight > 0.0) {
                        return Err(SettingError::MixWeight { weight: part.weight });
                    }
                    total += part.weight;
                    cumulative.push(total);
                    sources.push((part.first_block, Source::new(&part.pattern)?));
                }
                Source::Mix { cumulative, parts: sources }
            }
        })
    }

    /// The next block number and the index of the mix part it came from.
    fn sample(&mut self, rng: &mut Xoshiro256PlusPlus) -> (u64, u32) {
        match self {
            // Zipf samples are whole ranks 1..=n carried in an f64.
            Source::Zipf(zipf) => (zipf.sample(rng) as u64 - 1, 0),
            Source::Uniform(blocks) => (rng.random_range(0..*blocks), 0),
            Source::Scan { next } => {
                let block = *next;
                *next = next.wrapping_add(1);
                (block, 0)
            }
            Source::Loop { blocks, next } => {
                let block = *next;
                *next = (*next + 1) % *blocks;
                (block, 0)
            }
            Source::Mix { cumulative, parts } => {
                let total = *cumulative.last().expect("a mix has parts");
                let pick = rng.random_range(0.0..total);
                let index = cumulative.partition_point(|&c| c <= pick).min(parts.len() - 1);
                let (first_block, source) = &mut parts[index];
                let (block, _) = source.sample(rng);
                (first_block.wrapping_add(block), index as u32)
            }
        }
    }
}

impl Synth {
    /// A generator of `pattern` seeded with `seed`, issuing 4 KiB reads one
    /// microsecond apart. Errors on an empty range, a bad Zipf exponent or
    /// non-positive mix weights.
    pub fn new(pattern: Pattern, seed: u64) -> Result<Synth, SettingError> {
        Ok(Synth {
            source: Source::new(&pattern)?,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            block_size: 4096,
            interarrival_ns: 1000,
            write_fraction: 0.0,
            issued: 0,
        })
    }

    /// Bytes per request and per block (default 4096).
    pub fn block_size(mut self, bytes: u32) -> Self {
        assert!(bytes > 0, "block size must be positive");
        self.block_size = bytes;
        self
    }

    /// Time between consecutive requests (default 1000 ns).
    pub fn interarrival_ns(mut self, ns: u64) -> Self {
        self.interarrival_ns = ns;
        self
    }

    /// Fraction of requests that are writes, in `[0, 1]` (default 0).
    pub fn write_fraction(mut self, fraction: f64) -> Self {
        assert!((0.0..=1.0).contains(&fraction), "write fraction must be in [0, 1]");
        self.write_fraction = fraction;
        self
    }
}

impl Iterator for Synth {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        let (block, client) = self.source.sample(&mut self.rng);
        let op =
            if self.write_fraction > 0.0 && self.rng.random_bool(self.write_fraction) { Op::Write } else { Op::Read };
        let time_ns = self.issued.wrapping_mul(self.interarrival_ns);
        self.issued += 1;
        Some(Request {
            time_ns,
            client,
            op,
            offset: block.wrapping_mul(u64::from(self.block_size)),
            len: self.block_size,
            next_access: None,
        })
    }
}

/// Parses the command-line spelling of a single pattern:
/// `zipf:<blocks>:<alpha>`, `uniform:<blocks>`, `scan[:<start>]`, `loop:<blocks>`.
impl FromStr for Pattern {
    type Err = SettingError;

    fn from_str(s: &str) -> Result<Pattern, SettingError> {
        let mut parts = s.split(':');
        let kind = parts.next().unwrap_or_default();
        let args: Vec<&str> = parts.collect();
        // `oltp` is the OLTP-like generator the simulator tries before these patterns.
        let usage = "expected zipf:<blocks>:<alpha>, uniform:<blocks>, scan[:<start>], loop:<blocks> or oltp";
        let bad = |problem: String| SettingError::Pattern { spec: s.to_string(), problem };
        let number = |i: usize, what: &str| -> Result<u64, SettingError> {
            let text = args.get(i).ok_or_else(|| bad(format!("missing {what}; {usage}")))?;
            text.parse().map_err(|e| bad(format!("bad {what} {text:?}: {e}")))
        };
        let pattern = match (kind, args.len()) {
            ("zipf", 2) => {
                let alpha = args[1].parse().map_err(|e| bad(format!("bad alpha {:?}: {e}", args[1])))?;
                Pattern::Zipf { blocks: number(0, "block count")?, alpha }
            }
            ("uniform", 1) => Pattern::Uniform { blocks: number(0, "block count")? },
            ("scan", 0) => Pattern::Scan { start: 0 },
            ("scan", 1) => Pattern::Scan { start: number(0, "start block")? },
            ("loop", 1) => Pattern::Loop { blocks: number(0, "block count")? },
            _ => return Err(bad(usage.to_string())),
        };
        Ok(pattern)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Zipf { blocks, alpha } => write!(f, "zipf:{blocks}:{alpha}"),
            Pattern::Uniform { blocks } => write!(f, "uniform:{blocks}"),
            Pattern::Scan { start } => write!(f, "scan:{start}"),
            Pattern::Loop { blocks } => write!(f, "loop:{blocks}"),
            Pattern::Mix(parts) => {
                let parts: Vec<String> =
                    parts.iter().map(|p| format!("{}x{}@{}", p.weight, p.pattern, p.first_block)).collect();
                write!(f, "mix({})", parts.join(", "))
            }
        }
    }
}

//! What a registry row (a policy's, an admission policy's, a prefetcher's
//! in `hearth_prefetch::SCHEMES`) says about each parameter it takes: its name and the
//! values it accepts. A spec is checked by reading its rows
//! ([`PolicySpec`](crate::PolicySpec) when parsed), without building the
//! policy; the constructors keep their own guards for callers in code, and
//! a test holds the two in agreement.

use std::fmt;

/// One parameter of a policy, admission policy or prefetcher.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub accepts: Accepts,
    /// What a number counts, for messages (`samples`); empty if nothing.
    pub unit: &'static str,
}

/// The values a parameter accepts.
#[derive(Debug, Clone, Copy)]
pub enum Accepts {
    /// A whole number in `min..=max`.
    Whole { min: u64, max: u64 },
    /// A finite number between two bounds.
    Number { low: Bound, high: Bound },
    /// One of these words.
    Word(&'static [&'static str]),
    /// One of these words, or a whole number of at least `min`.
    WordOrWhole { words: &'static [&'static str], min: u64 },
    /// A generator's seed: any whole number but 0 (the generator would stay at 0).
    Seed,
    /// A size in bytes (`1MiB`).
    Bytes,
    /// `true` or `false`.
    Flag,
}

/// One end of a [`Accepts::Number`] range.
#[derive(Debug, Clone, Copy)]
pub enum Bound {
    Unbounded,
    Inclusive(f64),
    Exclusive(f64),
}

/// Why a value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not of the parameter's type (not a number, say).
    NotOfType,
    /// Of its type but outside what it accepts: the one-line reason.
    OutOfRange(String),
}

impl Param {
    const fn of(name: &'static str, accepts: Accepts) -> Param {
        Param { name, accepts, unit: "" }
    }
    pub const fn whole(name: &'static str, min: u64, max: u64) -> Param {
        Param::of(name, Accepts::Whole { min, max })
    }
    pub const fn number(name: &'static str, low: Bound, high: Bound) -> Param {
        Param::of(name, Accepts::Number { low, high })
    }
    pub const fn word(name: &'static str, words: &'static [&'static str]) -> Param {
        Param::of(name, Accepts::Word(words))
    }
    pub const fn word_or_whole(name: &'static str, words: &'static [&'static str], min: u64) -> Param {
        Param::of(name, Accepts::WordOrWhole { words, min })
    }
    pub const fn seed() -> Param {
        Param::of("seed", Accepts::Seed)
    }
    pub const fn bytes(name: &'static str) -> Param {
        Param::of(name, Accepts::Bytes)
    }
    pub const fn flag(name: &'static str) -> Param {
        Param::of(name, Accepts::Flag)
    }
    /// The same values under another name.
    pub const fn named(self, name: &'static str) -> Param {
        Param { name, ..self }
    }
    /// The same parameter counting `unit` (`samples`), for messages.
    pub const fn counting(self, unit: &'static str) -> Param {
        Param { unit, ..self }
    }

    /// Values that exercise this declaration, for tests holding a registry
    /// row and its constructor in agreement: the bounds and just past them,
    /// each word, and some values of every type. Not infinities: rows refuse
    /// them everywhere, where a few constructors take an infinite ghost.
    pub fn probes(&self) -> Vec<String> {
        let mut probes: Vec<String> =
            ["0", "1", "2", "-1", "0.5", "1.5", "255", "256", "4294967296", "1e30", "x", "NaN"]
                .map(String::from)
                .to_vec();
        let mut near = |b: f64| probes.extend([b - 1e-3, b, b + 1e-3].map(|x| x.to_string()));
        match self.accepts {
            Accepts::Whole { min, max } => {
                probes.extend([min, max].map(|n| n.to_string()));
                probes.extend(min.checked_sub(1).into_iter().chain(max.checked_add(1)).map(|n| n.to_string()));
            }
            Accepts::Number { low, high } => {
                for bound in [low, high] {
                    if let Bound::Inclusive(b) | Bound::Exclusive(b) = bound {
                        near(b);
                    }
                }
            }
            Accepts::Word(words) => probes.extend(words.iter().map(|w| w.to_string())),
            Accepts::WordOrWhole { words, min } => {
                probes.extend(words.iter().map(|w| w.to_string()));
                probes.extend([min.saturating_sub(1), min].map(|n| n.to_string()));
            }
            Accepts::Seed => {}
            Accepts::Bytes => probes.extend(["1MiB", "4096", "1.5KiB"].map(String::from)),
            Accepts::Flag => probes.extend(["true", "false", "yes"].map(String::from)),
        }
        probes
    }

    /// Whether `value` (trimmed, as written) is one this parameter accepts.
    pub fn check(&self, value: &str) -> Result<(), Refusal> {
        let name = self.name;
        let unit = if self.unit.is_empty() { String::new() } else { format!(" {}", self.unit) };
        let out_of_range = |what: String| Err(Refusal::OutOfRange(format!("{name} must be {what}, got {value}")));
        match self.accepts {
            Accepts::Whole { min, max } => {
                let n = whole(value)?;
                if (min..=max).contains(&n) {
                    Ok(())
                } else if max == u64::MAX {
                    out_of_range(format!("at least {min}{unit}"))
                } else {
                    out_of_range(format!("between {min} and {max}{unit}"))
                }
            }
            Accepts::Number { low, high } => {
                let x: f64 = value.parse().map_err(|_| Refusal::NotOfType)?;
                let above = match low {
                    Bound::Unbounded => true,
                    Bound::Inclusive(b) => x >= b,
                    Bound::Exclusive(b) => x > b,
                };
                let below = match high {
                    Bound::Unbounded => true,
                    Bound::Inclusive(b) => x <= b,
                    Bound::Exclusive(b) => x < b,
                };
                if x.is_finite() && above && below {
                    Ok(())
                } else {
                    out_of_range(range_text(low, high, self.unit))
                }
            }
            Accepts::Word(words) if words.contains(&value) => Ok(()),
            Accepts::Word(words) => {
                Err(Refusal::OutOfRange(format!("{name} must be {}, got {value:?}", alternatives(words, None))))
            }
            Accepts::WordOrWhole { words, min } => match whole(value) {
                _ if words.contains(&value) => Ok(()),
                Ok(n) if n >= min => Ok(()),
                _ => Err(Refusal::OutOfRange(format!(
                    "{name} must be {}, got {value:?}",
                    alternatives(words, Some(min))
                ))),
            },
            Accepts::Seed => match whole(value)? {
                0 => Err(Refusal::OutOfRange(format!("{name} must not be 0 (the generator would stay at 0)"))),
                _ => Ok(()),
            },
            Accepts::Bytes => hearth_core::parse_bytes(value).map(drop).map_err(|_| Refusal::NotOfType),
            Accepts::Flag => value.parse::<bool>().map(drop).map_err(|_| Refusal::NotOfType),
        }
    }
}

fn whole(value: &str) -> Result<u64, Refusal> {
    value.parse().map_err(|_| Refusal::NotOfType)
}

/// `in (0, 1]`, `a number >= 0`, `a number of cache sizes > 0`.
fn range_text(low: Bound, high: Bound, unit: &str) -> String {
    let number = if unit.is_empty() { "a number".to_string() } else { format!("a number of {unit}") };
    match (low, high) {
        (Bound::Unbounded, Bound::Unbounded) => format!("{number}, finite"),
        (low, Bound::Unbounded) => format!("{number} {low}"),
        (low, high) => {
            let open = if matches!(low, Bound::Exclusive(_)) { '(' } else { '[' };
            let close = if matches!(high, Bound::Exclusive(_)) { ')' } else { ']' };
            format!("in {open}{}, {}{close}", value_of(low), value_of(high))
        }
    }
}

fn value_of(bound: Bound) -> String {
    match bound {
        Bound::Unbounded => "inf".into(),
        Bound::Inclusive(b) | Bound::Exclusive(b) => b.to_string(),
    }
}

/// A lower bound as a comparison: `>= 0`, `> 0`.
impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Unbounded => write!(f, "of any size"),
            Bound::Inclusive(b) => write!(f, ">= {b}"),
            Bound::Exclusive(b) => write!(f, "> {b}"),
        }
    }
}

/// `"a", "b" or "c"`, and `or a whole number >= min` when one is allowed.
fn alternatives(words: &[&str], min: Option<u64>) -> String {
    let mut all: Vec<String> = words.iter().map(|w| format!("{w:?}")).collect();
    if let Some(min) = min {
        all.push(format!("a whole number >= {min}"));
    }
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => all.concat(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_what_is_accepted() {
        let refusal = |p: Param, v: &str| match p.check(v) {
            Err(Refusal::OutOfRange(reason)) => reason,
            other => panic!("{v}: {other:?}"),
        };
        assert_eq!(refusal(Param::whole("bits", 1, 8), "9"), "bits must be between 1 and 8, got 9");
        assert_eq!(refusal(Param::whole("k", 1, u64::MAX), "0"), "k must be at least 1, got 0");
        let share = Param::number("p", Bound::Exclusive(0.0), Bound::Inclusive(1.0));
        assert_eq!(refusal(share, "0"), "p must be in (0, 1], got 0");
        assert_eq!(refusal(share, "NaN"), "p must be in (0, 1], got NaN");
        let open = Param::number("ghost", Bound::Inclusive(0.0), Bound::Unbounded);
        assert_eq!(refusal(open, "-1"), "ghost must be a number >= 0, got -1");
        assert_eq!(refusal(open, "inf"), "ghost must be a number >= 0, got inf");
        assert_eq!(
            refusal(Param::word("step", &["byte", "size"]), "x"),
            "step must be \"byte\" or \"size\", got \"x\""
        );
        let aging = Param::word_or_whole("aging", &["none", "da"], 1);
        assert_eq!(refusal(aging, "0"), "aging must be \"none\", \"da\" or a whole number >= 1, got \"0\"");
        assert_eq!(aging.check("da").and(aging.check("10")), Ok(()));
        assert_eq!(refusal(Param::seed(), "0"), "seed must not be 0 (the generator would stay at 0)");
        assert_eq!(Param::whole("m", 1, 32).check("abc"), Err(Refusal::NotOfType));
        assert_eq!(Param::bytes("max").check("1MiB"), Ok(()));
    }
}

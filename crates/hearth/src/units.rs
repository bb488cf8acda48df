//! The command line's value parsers for durations and shares (the syntax is
//! `hearth_core::units`', shared with config files), and the old spellings
//! kept for one release: each still works and prints a one-line note on
//! stderr naming the new one. The conventions are in docs/GUIDE.md, "Flag
//! conventions".

use std::fmt::Display;
use std::str::FromStr;
use std::time::Duration;

/// A clap value parser made at run time (it knows its flag's name).
pub trait Parser<T>: Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {}
impl<T, F: Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static> Parser<T> for F {}

/// Prints a deprecation note; the command goes on.
pub fn note(message: &str) {
    eprintln!("hearth: note: {message}");
}

/// `500us`, `2ms`, `30s`, `30m`, `1d`: a number and its unit.
pub fn duration(s: &str) -> Result<Duration, String> {
    hearth_core::parse_duration(s).map_err(|e| e.to_string())
}

/// `30%`: a share, as a fraction in [0, 1].
pub fn percent(s: &str) -> Result<f64, String> {
    hearth_core::parse_percent(s).map_err(|e| e.to_string())
}

/// What a bare number meant before shares were written as percentages.
#[derive(Clone, Copy)]
pub enum BareShare {
    /// `0.3` was 30%.
    Fraction,
    /// `30` was 30%.
    Percent,
}

/// A share as a percentage (`30%`); a bare number is read as it was before
/// (see [`BareShare`]), with a note. A bare fraction above 1 is refused
/// with the percentage it probably meant.
pub fn share(flag: &'static str, bare: BareShare) -> impl Parser<f64> {
    move |s: &str| {
        let t = s.trim();
        if t.ends_with('%') {
            return percent(t);
        }
        let Ok(n) = t.parse::<f64>() else { return percent(t) };
        let fraction = match bare {
            BareShare::Fraction if (0.0..=1.0).contains(&n) => n,
            BareShare::Fraction => return Err(format!("{t:?} is not a share: write {t}% for a percentage")),
            BareShare::Percent => percent(&format!("{t}%"))?,
        };
        let written = format!("{}%", trim(fraction * 100.0));
        note(&format!("{flag} {t} is read as {written}; write shares as percentages ({flag} {written})"));
        Ok(fraction)
    }
}

/// A duration with its unit, or a bare number of seconds (the old spelling
/// of `flag`) with a note; `0` needs no unit.
pub fn duration_or_seconds(flag: &'static str) -> impl Parser<Duration> {
    move |s: &str| {
        let t = s.trim();
        match t.parse::<f64>() {
            Ok(n) if n != 0.0 => {
                note(&format!("{flag} {t} is read as {t}s; write durations with a unit ({flag} {t}s)"));
                duration(&format!("{t}s"))
            }
            _ => duration(t),
        }
    }
}

/// An old flag with its unit in its name (`--think-ms 5`): the number in
/// that unit, with a note naming the new flag (`--think 5ms`).
pub fn unit_in_name(old: &'static str, new: &'static str, unit: &'static str) -> impl Parser<Duration> {
    move |s: &str| {
        let t = s.trim();
        t.parse::<f64>().map_err(|_| format!("{old} takes a number of {unit}, got {t:?}"))?;
        note(&format!("{old} is deprecated: use {new} {t}{unit}"));
        duration(&format!("{t}{unit}"))
    }
}

/// An old name of a flag whose values are unchanged, with a note.
pub fn renamed<T>(old: &'static str, new: &'static str) -> impl Parser<T>
where
    T: FromStr,
    T::Err: Display,
{
    move |s: &str| {
        note(&format!("{old} is deprecated: use {new}"));
        s.parse().map_err(|e: T::Err| e.to_string())
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `--warmup`: the leading part of a trace replayed but not counted, a
/// count (`1000000`) or a share (`10%`). A bare fraction (`0.3`, the old
/// spelling of `prefetch --warmup`) is read as a share, with a note.
pub fn warmup(s: &str) -> Result<hearth_sim::run::Warmup, String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<f64>() {
        if n.fract() != 0.0 && (0.0..1.0).contains(&n) {
            let written = format!("{}%", trim(n * 100.0));
            note(&format!("--warmup {t} is read as {written}; write shares as percentages (--warmup {written})"));
            return Ok(hearth_sim::run::Warmup::Share(n));
        }
    }
    t.parse().map_err(|e: hearth_sim::SettingError| e.to_string())
}

/// An old spelling whose name now means something else elsewhere: refused,
/// naming the flag to use instead.
pub fn moved(old: &'static str, new: &'static str, why: &'static str) -> impl Parser<String> {
    move |_: &str| Err(format!("{old} is now {new} ({why})"))
}

/// An old name of a plot path flag, checked as the new one is, with a note.
pub fn renamed_plot(old: &'static str, new: &'static str) -> impl Parser<std::path::PathBuf> {
    move |s: &str| {
        note(&format!("{old} is deprecated: use {new}"));
        crate::out_paths::plot(s)
    }
}

/// Bytes per second with `/s` (`100MiB/s`, `250MB/s`); a size without `/s`
/// (the old spelling, `100MiB`) is read per second with a note, a bare
/// number refused with the spelling meant.
pub fn rate(flag: &'static str) -> impl Parser<u64> {
    move |s: &str| {
        let t = s.trim();
        match hearth_core::parse_rate(t) {
            Err(hearth_core::ValueError::NoRateUnit { .. }) if t.ends_with(|c: char| c.is_ascii_alphabetic()) => {
                let per_second = format!("{t}/s");
                let bytes = hearth_core::parse_rate(&per_second).map_err(|e| e.to_string())?;
                note(&format!("{flag} {t} is read as {per_second}; write rates per second ({flag} {per_second})"));
                Ok(bytes)
            }
            r => r.map_err(|e| e.to_string()),
        }
    }
}

//! Durations, shares and rates as people write and read them: one parser and
//! one formatter each, so every command and config file speaks alike
//! (`500us`, `2ms`, `30s`, `30m`, `1d`; `30%`; `100MiB/s`; `75 µs`, `250 MB/s`).

use std::time::Duration;

use crate::ValueError;

/// Parses a number with a unit: `ns`, `us`/`µs`, `ms`, `s`, `m`/`min`, `h`,
/// `d`. `0` needs no unit; any other bare number is refused, because it
/// could mean seconds or milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, ValueError> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(ValueError::Negative { what: "duration", input: s.into() });
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| ValueError::NotANumber {
        what: "duration",
        input: s.into(),
        hint: " (use e.g. 500us, 2ms, 30s, 30m, 1d)",
    })?;
    let unit_ns = match unit.trim() {
        "" if n == 0.0 => 0.0,
        "" => {
            return Err(ValueError::NoUnit {
                input: s.into(),
                as_seconds: format!("{num}s"),
                as_millis: format!("{}ms", trim_number(n * 1000.0)),
            })
        }
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3_600e9,
        "d" => 86_400e9,
        u => {
            return Err(ValueError::UnknownUnit {
                what: "duration",
                unit: u.into(),
                input: s.into(),
                hint: " (use ns, us, ms, s, m, h or d)",
            })
        }
    };
    // Whole nanoseconds, rounded: 0.3ms is 300000 ns, not 299999.
    let ns = (n * unit_ns).round();
    if ns >= u64::MAX as f64 {
        return Err(ValueError::OutOfRange { what: "duration", input: s.into() });
    }
    Ok(Duration::from_nanos(ns as u64))
}

/// A duration in the largest unit that keeps it at or above 1: `75 µs`,
/// `5.4 ms`, `30 s`, `5.7 min`, `2.5 h`, `4 d`.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    const STEPS: [(f64, &str); 6] =
        [(86_400e9, "d"), (3_600e9, "h"), (60e9, "min"), (1e9, "s"), (1e6, "ms"), (1e3, "µs")];
    for (scale, unit) in STEPS {
        if ns >= scale {
            return format!("{} {unit}", short_number(ns / scale));
        }
    }
    if ns == 0.0 {
        "0 s".into()
    } else {
        format!("{ns:.0} ns")
    }
}

/// Parses a percentage (`30%`, `2.5%`) into a fraction in [0, 1].
pub fn parse_percent(s: &str) -> Result<f64, ValueError> {
    let t = s.trim();
    let Some(number) = t.strip_suffix('%') else {
        return Err(ValueError::NoPercentSign { input: s.into() });
    };
    let p: f64 =
        number.trim().parse().map_err(|_| ValueError::NotANumber { what: "percentage", input: s.into(), hint: "" })?;
    if !(0.0..=100.0).contains(&p) {
        return Err(ValueError::PercentOutOfRange { input: s.into() });
    }
    Ok(p / 100.0)
}

/// Parses bytes per second written with a size unit and `/s`: decimal units
/// as device speeds are quoted and [`format_rate`] prints them (`250MB/s`,
/// `250 MB/s`, `1.5GB/s`, `500kB/s`) or binary ones (`100MiB/s`, `1GiB/s`).
/// A bare number or a size without `/s` is refused with the spelling meant.
pub fn parse_rate(s: &str) -> Result<u64, ValueError> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(ValueError::Negative { what: "rate", input: s.into() });
    }
    let Some(size) = t.strip_suffix("/s") else {
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let hint = match unit.trim() {
            "" => format!("{num}MB/s or {num}MiB/s"),
            unit => format!("{num}{unit}/s"),
        };
        return Err(ValueError::NoRateUnit { input: s.into(), hint });
    };
    let split = size.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(size.len());
    let (num, unit) = size.split_at(split);
    let n: f64 = num.parse().map_err(|_| ValueError::NotANumber { what: "rate", input: s.into(), hint: "" })?;
    let scale: f64 = match unit.trim() {
        "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        u => {
            return Err(ValueError::UnknownUnit {
                what: "rate",
                unit: u.into(),
                input: s.into(),
                hint: " (use B, kB, MB, GB, TB or KiB, MiB, GiB, TiB, then /s)",
            })
        }
    };
    let bytes = (n * scale).round();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(ValueError::OutOfRange { what: "rate", input: s.into() });
    }
    Ok(bytes as u64)
}

/// Bytes per second in decimal units, as device speeds are quoted:
/// `250 MB/s`, `1.5 GB/s`.
pub fn format_rate(bytes_per_sec: u64) -> String {
    const UNITS: [(f64, &str); 4] = [(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")];
    let b = bytes_per_sec as f64;
    for (scale, unit) in UNITS {
        if b >= scale {
            return format!("{} {unit}", short_number(b / scale));
        }
    }
    format!("{bytes_per_sec} B/s")
}

/// One decimal at most, none from 100 up, no trailing zeros: 75, 5.4, 163.
fn short_number(v: f64) -> String {
    let digits = if v >= 100.0 { 0 } else { 1 };
    trim_number(format!("{v:.digits$}").parse().unwrap_or(v))
}

fn trim_number(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit_and_print_in_the_largest_one() {
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("500µs"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("2ms"), Ok(Duration::from_millis(2)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30min"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0.3ms"), Ok(Duration::from_nanos(300_000)));
        assert_eq!(parse_duration("2").unwrap_err().to_string(), "duration \"2\" has no unit: use 2s or 2000ms");
        assert!(parse_duration("-2s").unwrap_err().to_string().contains("negative"));
        assert!(parse_duration("3 weeks").unwrap_err().to_string().contains("unit \"weeks\""));
        assert!(parse_duration("soon").unwrap_err().to_string().contains("not a duration"));
        assert_eq!(format_duration(Duration::from_nanos(75_000)), "75 µs");
        assert_eq!(format_duration(Duration::from_micros(5_400)), "5.4 ms");
        assert_eq!(format_duration(Duration::from_secs(342)), "5.7 min");
        assert_eq!(format_duration(Duration::from_secs(86_400)), "1 d");
        assert_eq!(format_duration(Duration::from_nanos(120)), "120 ns");
        assert_eq!(format_duration(Duration::ZERO), "0 s");
    }

    #[test]
    fn percentages_and_rates() {
        assert_eq!(parse_percent("30%"), Ok(0.3));
        assert_eq!(parse_percent(" 2.5 % "), Ok(0.025));
        assert!(parse_percent("0.3").unwrap_err().to_string().contains("with %"));
        assert!(parse_percent("150%").unwrap_err().to_string().contains("between 0% and 100%"));
        assert_eq!(format_rate(250_000_000), "250 MB/s");
        assert_eq!(format_rate(163_000_000), "163 MB/s");
        assert_eq!(format_rate(1_500_000_000), "1.5 GB/s");
        assert_eq!(format_rate(512), "512 B/s");
        assert_eq!(parse_rate("100MiB/s"), Ok(100 << 20));
        assert_eq!(parse_rate("250MB/s"), Ok(250_000_000));
        assert_eq!(parse_rate("1GiB/s"), Ok(1 << 30));
        assert_eq!(parse_rate("1.5 GB/s"), Ok(1_500_000_000));
        // What format_rate prints reads back as the same rate.
        for r in [250_000_000, 163_000_000, 1_500_000_000, 512] {
            assert_eq!(parse_rate(&format_rate(r)), Ok(r));
        }
        assert_eq!(parse_rate("100").unwrap_err().to_string(), "rate \"100\" has no unit: write 100MB/s or 100MiB/s");
        assert_eq!(parse_rate("100MiB").unwrap_err().to_string(), "rate \"100MiB\" has no unit: write 100MiB/s");
        assert!(parse_rate("100mb/s").unwrap_err().to_string().contains("unit \"mb\""));
        assert!(parse_rate("-1MB/s").unwrap_err().to_string().contains("negative"));
    }
}

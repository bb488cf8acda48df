//! Human byte sizes: `4096`, `4k`, `4KiB`, `128MiB`, `1.5G` (binary units).

use crate::ValueError;

/// Parses a byte size; suffixes are binary (k = 1024) and case-insensitive.
pub fn parse_bytes(s: &str) -> Result<u64, ValueError> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(ValueError::Negative { what: "size", input: s.into() });
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| ValueError::NotANumber { what: "byte size", input: s.into(), hint: "" })?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        u => return Err(ValueError::UnknownUnit { what: "size", unit: u.into(), input: s.into(), hint: "" }),
    };
    let bytes = n * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(ValueError::OutOfRange { what: "byte size", input: s.into() });
    }
    Ok(bytes.round() as u64)
}

/// Formats bytes with the largest binary unit that keeps the number >= 1.
pub fn format_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_rejects_garbage() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("4k"), Ok(4096));
        assert_eq!(parse_bytes("128MiB"), Ok(128 << 20));
        assert_eq!(parse_bytes("1.5G"), Ok(3 << 29));
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("").is_err());
        assert_eq!(parse_bytes("-5MiB").unwrap_err().to_string(), "size \"-5MiB\" is negative");
        assert_eq!(format_bytes(128 << 20), "128 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
    }
}

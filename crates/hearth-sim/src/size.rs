//! Cache sizes as users write them: bytes (`64MiB`), blocks (`5000blocks`),
//! objects (`5000objects`, when every object counts as one), or a share of
//! the trace's footprint (`5%`), and ranges `128MiB..1GiB/128MiB`.

use std::fmt;

use crate::SettingError;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CacheSize {
    Bytes(u64),
    Blocks(u64),
    /// A number of objects, for traces whose objects all have size 1
    /// (`--ignore-obj-size`, or a format without sizes): libCacheSim's cache
    /// sizes with `--ignore-obj-size`.
    Objects(u64),
    /// Fraction (0..=1] of the trace's footprint.
    Footprint(f64),
}

impl CacheSize {
    /// Bytes for a trace with this footprint; `Blocks` needs a block size.
    /// `Objects` is refused: only [`CacheSize::resolve_objects`] knows whether
    /// every object counts as one.
    pub fn resolve(self, footprint_bytes: u64, block_size: Option<u32>) -> Result<u64, SettingError> {
        self.resolve_objects(footprint_bytes, block_size, false)
    }

    /// [`CacheSize::resolve`], taking `Objects` as that many bytes when
    /// `unit_objects` (every object of the trace has size 1).
    pub fn resolve_objects(
        self,
        footprint_bytes: u64,
        block_size: Option<u32>,
        unit_objects: bool,
    ) -> Result<u64, SettingError> {
        let bytes = match self {
            CacheSize::Bytes(b) => {
                // A bare `-s 100` on a block trace: a cache that holds no block, surely not meant.
                if let Some(bs) = block_size.filter(|&bs| b > 0 && b < u64::from(bs)) {
                    let block = hearth_core::format_bytes(bs.into());
                    return Err(SettingError::BelowOneBlock { size: self.to_string(), block, bytes: b });
                }
                b
            }
            CacheSize::Blocks(n) => {
                let bs = block_size.ok_or(SettingError::BlocksWithoutBlockMode)?;
                n * u64::from(bs)
            }
            CacheSize::Objects(n) if unit_objects && block_size.is_none() => n,
            CacheSize::Objects(_) => return Err(SettingError::ObjectsWithSizes { size: self.to_string() }),
            CacheSize::Footprint(f) => {
                let b = (footprint_bytes as f64 * f).round() as u64;
                // Whole blocks, and at least one.
                let unit = u64::from(block_size.unwrap_or(1));
                (b / unit).max(1) * unit
            }
        };
        if bytes == 0 {
            return Err(SettingError::ZeroBytes { size: self.to_string() });
        }
        Ok(bytes)
    }
}

impl fmt::Display for CacheSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheSize::Bytes(b) => write!(f, "{}", hearth_core::format_bytes(*b)),
            CacheSize::Blocks(n) => write!(f, "{n} blocks"),
            CacheSize::Objects(n) => write!(f, "{n} objects"),
            CacheSize::Footprint(x) => write!(f, "{}% of footprint", x * 100.0),
        }
    }
}

fn parse_one(s: &str) -> Result<CacheSize, SettingError> {
    let s = s.trim();
    if let Some(p) = s.strip_suffix('%') {
        let pct: f64 = p.trim().parse().map_err(|_| SettingError::Percentage { input: s.into() })?;
        if !(pct > 0.0 && pct <= 100.0) {
            return Err(SettingError::ShareOutOfRange { input: s.into() });
        }
        return Ok(CacheSize::Footprint(pct / 100.0));
    }
    if let Some(n) = s.strip_suffix("blocks").or_else(|| s.strip_suffix("blk")) {
        return n.trim().parse().map(CacheSize::Blocks).map_err(|_| SettingError::BlockCount { input: s.into() });
    }
    if let Some(n) = s.strip_suffix("objects").or_else(|| s.strip_suffix("objs")) {
        return n.trim().parse().map(CacheSize::Objects).map_err(|_| SettingError::ObjectCount { input: s.into() });
    }
    if let Ok(n) = s.parse::<f64>() {
        // libCacheSim writes shares of the footprint as fractions; here 0.01 would be 0 bytes.
        if n > 0.0 && n < 1.0 {
            let pct = format!("{}%", (n * 1e6).round() / 1e4);
            return Err(SettingError::NoUnit { input: s.into(), hint: format!("{s} of the footprint as {pct}") });
        }
        if n.fract() != 0.0 {
            return Err(SettingError::NoUnit { input: s.into(), hint: format!("{s}MiB, {s}GiB or {s}%") });
        }
    }
    Ok(CacheSize::Bytes(hearth_core::parse_bytes(s)?))
}

/// Parses a comma-separated list of sizes; an item `A..B/STEP` (byte sizes)
/// expands to A, A+STEP, ..., up to B inclusive. A bare whole number is
/// bytes (a text trace's objects are 1 byte each); a bare fraction is
/// refused with a hint (`0.01` → `1%`).
pub fn parse_sizes(list: &str) -> Result<Vec<CacheSize>, SettingError> {
    let mut out = Vec::new();
    for item in list.split(',').filter(|s| !s.trim().is_empty()) {
        match item.split_once("..") {
            Some((lo, rest)) => {
                let (hi, step) =
                    rest.split_once('/').ok_or_else(|| SettingError::RangeWithoutStep { item: item.into() })?;
                let [lo, hi, step] = [lo, hi, step].map(hearth_core::parse_bytes);
                let (lo, hi, step) = (lo?, hi?, step?);
                if step == 0 || lo > hi {
                    return Err(SettingError::EmptyRange { item: item.into() });
                }
                out.extend((lo..=hi).step_by(step as usize).map(CacheSize::Bytes));
            }
            None => out.push(parse_one(item)?),
        }
    }
    if out.is_empty() {
        return Err(SettingError::NoSizes);
    }
    Ok(out)
}

/// The sizes `hearth sim` runs when none are given.
pub const DEFAULT_SIZES: &str = "1%,5%,10%,25%";
/// The sizes of a miss-ratio curve made of full simulations (`hearth sim
/// --mrc`) when none are given: shares of the footprint.
pub const MRC_SIZES: &str = "0.5%,1%,2%,3%,5%,7.5%,10%,15%,20%,30%,50%,75%,100%";

/// Points of [`mrc_grid`].
pub const MRC_GRID_POINTS: usize = 40;
/// The smallest share of the footprint in [`mrc_grid`].
pub const MRC_GRID_FROM: f64 = 0.001;

/// The one-pass curves' default grid (`hearth mrc`): [`MRC_GRID_POINTS`]
/// sizes evenly spaced on a log scale from [`MRC_GRID_FROM`] of the
/// footprint to all of it.
pub fn mrc_grid() -> Vec<CacheSize> {
    let step = (1.0 / MRC_GRID_FROM).ln() / (MRC_GRID_POINTS - 1) as f64;
    (0..MRC_GRID_POINTS).map(|i| CacheSize::Footprint((MRC_GRID_FROM.ln() + step * i as f64).exp().min(1.0))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mrc_grid_spans_a_thousandth_to_all_of_the_footprint() {
        let grid = mrc_grid();
        assert_eq!(grid.len(), MRC_GRID_POINTS);
        let CacheSize::Footprint(first) = grid[0] else { panic!() };
        let CacheSize::Footprint(last) = grid[MRC_GRID_POINTS - 1] else { panic!() };
        assert!((first - 0.001).abs() < 1e-12 && (last - 1.0).abs() < 1e-12, "{first} {last}");
        assert_eq!(parse_sizes(MRC_SIZES).unwrap().len(), 13);
        assert_eq!(parse_sizes(DEFAULT_SIZES).unwrap().len(), 4);
    }

    #[test]
    fn parses_bytes_blocks_shares_and_ranges() {
        let v = parse_sizes("64MiB, 5000blocks,5%,300objects").unwrap();
        assert_eq!(
            v,
            vec![
                CacheSize::Bytes(64 << 20),
                CacheSize::Blocks(5000),
                CacheSize::Footprint(0.05),
                CacheSize::Objects(300)
            ]
        );
        assert!(parse_sizes("manyobjects").unwrap_err().to_string().contains("bad object count"));
        let r = parse_sizes("128MiB..1GiB/128MiB").unwrap();
        assert_eq!(r.len(), 8);
        assert_eq!(r[7], CacheSize::Bytes(1 << 30));
        assert!(parse_sizes("0%").is_err());
        assert!(parse_sizes("1..2").is_err());
        assert!(parse_sizes("lots").is_err());
        // Whole numbers are bytes; fractions need a unit, a share of the footprint a percentage.
        assert_eq!(parse_sizes("3").unwrap(), vec![CacheSize::Bytes(3)]);
        let hint = |s: &str| parse_sizes(s).unwrap_err().to_string();
        assert_eq!(hint("0.01,0.1"), r#"cache size "0.01" has no unit: write 0.01 of the footprint as 1%"#);
        assert_eq!(hint("0.125"), r#"cache size "0.125" has no unit: write 0.125 of the footprint as 12.5%"#);
        assert_eq!(hint("1.5"), r#"cache size "1.5" has no unit: write 1.5MiB, 1.5GiB or 1.5%"#);
    }

    #[test]
    fn resolves_against_footprint_and_block_size() {
        assert_eq!(CacheSize::Footprint(0.5).resolve(10 * 4096, Some(4096)), Ok(5 * 4096));
        assert_eq!(CacheSize::Blocks(3).resolve(0, Some(4096)), Ok(3 * 4096));
        assert!(CacheSize::Blocks(3).resolve(0, None).is_err());
        // Fewer bytes than a block hold none; as many as an object trace's 1-byte objects are fine.
        let err = CacheSize::Bytes(100).resolve(1 << 30, Some(4096)).unwrap_err().to_string();
        assert_eq!(err, "cache size 100 B holds no 4 KiB block: give a unit (as 100MiB) or blocks (100blocks)");
        assert_eq!(CacheSize::Bytes(100).resolve(1 << 30, None), Ok(100));
        // Object counts only where every object counts as one, never in block mode.
        assert_eq!(CacheSize::Objects(300).resolve_objects(1 << 30, None, true), Ok(300));
        let err = CacheSize::Objects(300).resolve(1 << 30, None).unwrap_err().to_string();
        assert!(err.starts_with("cache size 300 objects counts objects") && err.contains("--ignore-obj-size"), "{err}");
        assert!(CacheSize::Objects(300).resolve_objects(1 << 30, Some(4096), true).is_err());
        // Never rounds down to an empty cache.
        assert_eq!(CacheSize::Footprint(0.001).resolve(4096, Some(4096)), Ok(4096));
    }
}

//! Cache warmup (Bonfire) in the server: a monitor that logs every change of
//! a cache's contents to a logging volume, and the pre-load that fills a new
//! or restarted cache from that log.
//!
//! The log format, its recovery and the pre-load plan are `hearth_warmup`'s
//! sans-I/O core ([`LogWriter`](hearth_warmup::log::LogWriter), [`Recovery`](hearth_warmup::log::Recovery),
//! [`plan_preload`](hearth_warmup::plan::plan_preload)); this module
//! only does their I/O:
//!
//! 1. [`WarmupLog::open`] reads the volume's header and every slot into a
//!    `Recovery`. A missing, corrupt or incompatible log is not an error:
//!    the export starts with on-demand warmup and a warning, and a new log.
//! 2. [`WarmupLog::preload`] executes a [`Plan`](hearth_warmup::plan::Plan) (newest unique blocks up to
//!    the budget, newest first): blocks whose logged data the log vouches for
//!    come from the volume, the others from the backend, so the cache never
//!    receives stale data. It runs before [`WarmupLog::start`], which is
//!    what overwrites the oldest slot.
//! 3. [`WarmupLog::start`] makes the resumed log's Open record (or a new
//!    header) durable — before the export serves, as the format requires —
//!    and returns the [`Monitor`]: the cache reports read fills and client
//!    writes to it (its `ContentLog`) under its lock, the records collect in the
//!    staging buffer, and full buffers go to a background thread that writes
//!    them sequentially. NBD FLUSH makes the log durable; only a clean
//!    shutdown seals it. (A seal at FLUSH would vouch for records that a
//!    later crash could still lose from the staging buffer.)
//!
//! A crash loses the staging buffer; the log on the volume is then what is
//! left, and its unsealed tail makes recovery distrust logged data.

mod log;
mod monitor;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hearth_warmup::log::HEADER_LEN;
use serde::Deserialize;
use tracing::{info, warn};

pub use log::{PreloadStats, WarmupLog};
pub use monitor::{Monitor, MonitorStats};

use crate::cache::BlockCache;
use crate::config::SizeValue;

/// Metadata logs record LBAs; data logs also each block's contents (a
/// performance snapshot the pre-load reads sequentially).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WarmupMode {
    #[default]
    Metadata,
    Data,
}

/// `[export.warmup]` in `hearth.toml`; `hearth serve`'s `--warmup-*` flags.
#[derive(Clone, Debug, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct WarmupConfig {
    /// Cache warmup: log the blocks the cache loads and clients write to this file or block device.
    #[arg(long = "warmup-log", id = "warmup_log", value_name = "PATH", required = false)]
    pub log: PathBuf,
    /// What the warmup log holds: metadata (block numbers) or data (blocks and their contents).
    #[serde(default)]
    #[arg(
        long = "warmup-mode",
        id = "warmup_mode",
        value_enum,
        value_name = "WARMUP_MODE",
        requires = "warmup_log",
        default_value_t,
        hide_default_value = true
    )]
    pub mode: WarmupMode,
    /// Most bytes to pre-load at start. Default (and at most) the cache size.
    #[arg(long = "warmup-budget", id = "warmup_budget", value_name = "SIZE", requires = "warmup_log")]
    pub budget: Option<SizeValue>,
    /// Staging buffer of the warmup log. Default 256KiB (metadata) or 128MiB (data).
    #[arg(long = "warmup-staging", id = "warmup_staging", value_name = "SIZE", requires = "warmup_log")]
    pub staging: Option<SizeValue>,
    /// Size of a warmup log file created by the server. Default 16MiB (metadata) or 1GiB (data).
    #[arg(long = "warmup-log-size", id = "warmup_log_size", value_name = "SIZE", requires = "warmup_log")]
    pub log_size: Option<SizeValue>,
    /// Pre-load the cache from the warmup log before serving (newest blocks first, never stale).
    #[serde(default)]
    #[arg(long = "warmup-preload", id = "warmup_preload", requires = "warmup_log")]
    pub preload: bool,
}

/// A [`WarmupConfig`] with defaults applied and sizes parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarmupSettings {
    pub log: PathBuf,
    pub mode: WarmupMode,
    pub budget: u64,
    pub staging: usize,
    pub log_size: u64,
    pub preload: bool,
}

/// A `warmup.*` setting that cannot be used: `key` names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem}")]
pub struct WarmupSettingError {
    pub key: &'static str,
    pub problem: String,
}

impl WarmupSettingError {
    fn new(key: &'static str, problem: impl ToString) -> Self {
        WarmupSettingError { key, problem: problem.to_string() }
    }
}

impl WarmupConfig {
    /// Applies defaults for a cache of `cache_bytes`; an error names the key.
    pub fn settings(&self, cache_bytes: u64) -> Result<WarmupSettings, WarmupSettingError> {
        let data = self.mode == WarmupMode::Data;
        let size = |key: &'static str, v: &Option<SizeValue>, default: u64| {
            v.as_ref().map_or(Ok(default), SizeValue::bytes).map_err(|m| WarmupSettingError::new(key, m))
        };
        let staging = size("staging", &self.staging, if data { 128 << 20 } else { 256 << 10 })?;
        let log_size = size("log_size", &self.log_size, if data { 1 << 30 } else { 16 << 20 })?;
        if log_size <= HEADER_LEN {
            return Err(WarmupSettingError::new(
                "log_size",
                format!("{log_size} bytes leave no room after the {HEADER_LEN}-byte header"),
            ));
        }
        Ok(WarmupSettings {
            log: self.log.clone(),
            mode: self.mode,
            budget: size("budget", &self.budget, cache_bytes)?.min(cache_bytes),
            staging: usize::try_from(staging)
                .map_err(|_| WarmupSettingError::new("staging", format!("{staging} bytes is too large")))?,
            log_size,
            preload: self.preload,
        })
    }
}

/// Sets up warmup for an export's cache before it serves: recover the log,
/// pre-load if asked (with a progress bar on a terminal), make the log ready
/// and attach the monitor to the cache.
/// `backend` is the backend's file, `None` for a memory backend (see
/// [`WarmupLog::check_backend`]).
pub fn start_export(
    export: &str,
    settings: &WarmupSettings,
    cache: &BlockCache,
    backend: Option<&Path>,
) -> io::Result<Arc<Monitor>> {
    let block_size = u32::try_from(cache.block_size()).expect("block sizes are at most 1 MiB");
    let mut log = WarmupLog::open(settings, block_size)?;
    log.check_backend(backend)?;
    if let Some(w) = &log.warning {
        warn!(export, "{w}");
    }
    let mut preloaded = PreloadStats::default();
    match (settings.preload, log.plan()) {
        (true, Some(plan)) => {
            if let Some(w) = &plan.warning {
                warn!(export, "{w}");
            }
            let bar = progress_bar(plan.items.len() as u64);
            match log.preload(cache, &plan, &|n| bar.inc(n)) {
                Ok(stats) => preloaded = stats,
                Err(e) => warn!(export, error = %e, "pre-load stopped early; the rest warms on demand"),
            }
            bar.finish_and_clear();
            info!(
                export,
                planned = preloaded.planned,
                blocks = preloaded.blocks,
                bytes = preloaded.bytes,
                from_log = preloaded.from_log,
                seconds = preloaded.seconds,
                "warmup pre-load done"
            );
        }
        (true, None) => info!(export, "nothing to pre-load: on-demand warmup"),
        (false, _) => {}
    }
    let monitor = log.start(preloaded)?;
    cache.set_content_log(monitor.clone());
    Ok(monitor)
}

/// A pre-load progress bar on stderr, hidden unless stderr is a terminal.
fn progress_bar(total: u64) -> indicatif::ProgressBar {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("warmup pre-load [{bar:40}] {pos}/{len} blocks {per_sec} eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar
}

/// The warmup families of the metrics page, for exports with a monitor.
pub(crate) fn render_metrics(out: &mut String, exports: &[Arc<crate::Export>]) {
    use std::fmt::Write as _;
    type Family = (&'static str, &'static str, &'static str, fn(&Monitor) -> f64);
    let families: [Family; 7] = [
        ("hearth_warmup_preloaded_blocks", "gauge", "Blocks the pre-load at start put into the cache.", |m| {
            m.preloaded.blocks as f64
        }),
        ("hearth_warmup_preloaded_bytes", "gauge", "Bytes the pre-load at start put into the cache.", |m| {
            m.preloaded.bytes as f64
        }),
        (
            "hearth_warmup_preloaded_from_log_blocks",
            "gauge",
            "Pre-loaded blocks whose data came from the warmup log.",
            |m| m.preloaded.from_log as f64,
        ),
        ("hearth_warmup_preload_seconds", "gauge", "How long the pre-load at start took.", |m| m.preloaded.seconds),
        (
            "hearth_warmup_log_records_total",
            "counter",
            "Blocks logged to the warmup log (loads and client changes).",
            |m| m.stats.records.load(Ordering::Relaxed) as f64,
        ),
        ("hearth_warmup_log_bytes_total", "counter", "Bytes written to the warmup logging volume.", |m| {
            m.stats.log_bytes.load(Ordering::Relaxed) as f64
        }),
        ("hearth_warmup_log_failed", "gauge", "1 if a write to the warmup log failed (it will not be sealed).", |m| {
            f64::from(u8::from(m.stats.failed.load(Ordering::Relaxed)))
        }),
    ];
    if exports.iter().all(|e| e.warmup().is_none()) {
        return;
    }
    for (name, kind, help, get) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for e in exports {
            if let Some(m) = e.warmup() {
                let _ = writeln!(out, "{name}{{export=\"{}\"}} {}", crate::metrics::label(e.name()), get(m));
            }
        }
    }
}

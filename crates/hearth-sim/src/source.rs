//! Opening a trace for simulation, with one set of rules for every front end
//! (the command line, the Python package): a file in any format
//! `hearth_trace` reads or a `synth:` workload, the block or object mode,
//! and the first pass over it when one is needed (footprint, access count,
//! next uses for offline policies), then as many fresh passes as the caller
//! wants (a file is read again, a generator re-run from its seed).

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hearth_core::Access;
use hearth_trace::oltp::{Oltp, OltpConfig};
use hearth_trace::sample::{self, AlwaysKept, KeptBatch, KeyRenaming, SampledOracle, Skipped};
use hearth_trace::synth::{Pattern, Synth};
use hearth_trace::{Columns, Format, Mode, Request, TraceError};

use crate::scan::{scan, with_next_access, Scan};
use crate::stream::StreamError;
use crate::{CacheSize, SettingError};
use hearth_policy::SpecError;

/// Why a trace could not be opened or simulated: a trace problem (its file
/// and the place in it) or a bad setting.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Policy(#[from] SpecError),
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// A synthetic workload's spec.
    #[error(transparent)]
    Generator(#[from] hearth_trace::SettingError),
    #[error("{flag} must be between 1 B and 4 GiB")]
    BlockSize { flag: &'static str },
    #[error("synthetic workloads are block traces; drop {flag}")]
    SynthInObjectMode { flag: &'static str },
    #[error("{flag} is for object mode ({object_mode}): block mode splits requests into blocks of one size")]
    IgnoreSizeInBlockMode { flag: &'static str, object_mode: &'static str },
    #[error("{} is an object trace ({format}): its ids are not byte offsets, so use {flag}", trace.display())]
    ObjectTraceInBlockMode { trace: PathBuf, format: Format, flag: &'static str },
    #[error("{0} holds no requests")]
    NoRequests(TraceInput),
    /// A sweep file that cannot be read or used; `error` says why.
    #[error("{}: {error}", file.display())]
    SweepFile { file: PathBuf, error: Box<SourceError> },
    #[error("{0}")]
    SweepRead(std::io::Error),
    #[error("{0}")]
    SweepToml(String),
    #[error("traces: no traces given")]
    NoTraces,
    #[error("policies: no policies given")]
    NoPolicies,
    #[error("sizes: {0}")]
    Sizes(SettingError),
    #[error("warmup: {0}")]
    Warmup(SettingError),
    #[error("block_size: {0}")]
    SweepBlockSize(hearth_core::ValueError),
    #[error("workers: at least one")]
    NoWorkers,
    #[error("traces: {0} is a synthetic workload, a block trace; drop mode = \"object\" or sweep it in another file")]
    SynthInObjectSweep(TraceInput),
}

impl From<StreamError> for SourceError {
    fn from(e: StreamError) -> Self {
        match e {
            StreamError::Trace(t) => SourceError::Trace(t),
            StreamError::Setting(m) => SourceError::Setting(m),
        }
    }
}

/// Block or object caching.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeChoice {
    /// Split each request into fixed-size blocks (a block cache).
    Block,
    /// One object per request, with its size (an object cache, as libCacheSim).
    Object,
}

impl std::str::FromStr for ModeChoice {
    type Err = SettingError;
    fn from_str(s: &str) -> Result<ModeChoice, SettingError> {
        match s.to_ascii_lowercase().as_str() {
            "block" => Ok(ModeChoice::Block),
            "object" => Ok(ModeChoice::Object),
            _ => Err(SettingError::Mode { input: s.into() }),
        }
    }
}

/// How a front end spells the settings an error message asks the user to
/// change (`--block-size` on the command line, `block_size` in Python).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionNames {
    pub block_size: &'static str,
    pub object_mode: &'static str,
    pub ignore_obj_size: &'static str,
}

impl Default for OptionNames {
    fn default() -> Self {
        OptionNames {
            block_size: "the block size",
            object_mode: "object mode",
            ignore_obj_size: "ignoring object sizes",
        }
    }
}

/// Requests generated for a `synth:` workload unless told otherwise.
pub const DEFAULT_REQUESTS: usize = 1_000_000;
/// Seed of a `synth:` workload unless told otherwise.
pub const DEFAULT_SEED: u64 = 42;
/// Block size in block mode unless told otherwise.
pub const DEFAULT_BLOCK_SIZE: u64 = 4096;

/// Where a trace's requests come from: a file, or a generator. Told apart
/// once, where the user names the trace (`synth:SPEC` is a generator), so
/// nothing downstream looks at the prefix again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceInput {
    /// A trace file in any format `hearth_trace` reads.
    File(PathBuf),
    /// A synthetic workload: the SPEC of `synth:SPEC` (`oltp`,
    /// `zipf:BLOCKS:ALPHA`, `uniform:BLOCKS`, `loop:BLOCKS`, `scan`; the
    /// tiering and warmup commands have their own). The generator parses it
    /// when the trace is opened, so a bad one is reported as before.
    Synth(String),
}

impl TraceInput {
    const SYNTH: &'static str = "synth:";

    /// The trace file, unless a generator.
    pub fn file(&self) -> Option<&Path> {
        match self {
            TraceInput::File(path) => Some(path),
            TraceInput::Synth(_) => None,
        }
    }

    /// The generator's spec, without `synth:`.
    pub fn synth(&self) -> Option<&str> {
        match self {
            TraceInput::File(_) => None,
            TraceInput::Synth(spec) => Some(spec),
        }
    }

    /// A file named relative to `dir` (a sweep file's directory) as seen from here.
    pub fn beside(self, dir: &Path) -> TraceInput {
        match self {
            TraceInput::File(path) => TraceInput::File(dir.join(path)),
            synth => synth,
        }
    }

    /// As `Path::display`: the file's path, or `synth:SPEC`.
    pub fn display(&self) -> &Self {
        self
    }
}

impl fmt::Display for TraceInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceInput::File(path) => path.display().fmt(f),
            TraceInput::Synth(spec) => write!(f, "{}{spec}", Self::SYNTH),
        }
    }
}

/// Every way a trace is named ends here: `synth:SPEC` is a generator,
/// anything else a file (whose name need not be UTF-8).
impl From<OsString> for TraceInput {
    fn from(name: OsString) -> TraceInput {
        match name.to_str().and_then(|s| s.strip_prefix(Self::SYNTH)) {
            Some(spec) => TraceInput::Synth(spec.to_string()),
            None => TraceInput::File(name.into()),
        }
    }
}

impl From<PathBuf> for TraceInput {
    fn from(path: PathBuf) -> TraceInput {
        path.into_os_string().into()
    }
}

impl From<&Path> for TraceInput {
    fn from(path: &Path) -> TraceInput {
        path.as_os_str().to_owned().into()
    }
}

impl From<&PathBuf> for TraceInput {
    fn from(path: &PathBuf) -> TraceInput {
        path.as_path().into()
    }
}

impl From<&str> for TraceInput {
    fn from(name: &str) -> TraceInput {
        OsString::from(name).into()
    }
}

/// A trace and how to read it.
#[derive(Clone, Debug)]
pub struct TraceSource {
    /// A trace file, or a synthetic workload.
    pub trace: TraceInput,
    /// The file's format when its name does not tell.
    pub format: Option<Format>,
    /// Which columns hold what, for a CSV or binary trace of any layout.
    pub columns: Option<Columns>,
    /// Every object counts as size 1 (object mode; libCacheSim's
    /// `--ignore-obj-size`), so that cache sizes count objects.
    pub ignore_obj_size: bool,
    /// Block or object caching; by default the format's (object for oracle and text traces).
    pub mode: Option<ModeChoice>,
    /// Block size for block mode.
    pub block_size: u64,
    /// Requests to generate for a `synth:` workload.
    pub requests: usize,
    /// Seed for a `synth:` workload.
    pub seed: u64,
    /// When set, every pass over the trace ends early once it is true.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Setting names for error messages.
    pub names: OptionNames,
}

/// Requests from a trace file or a generator, read lazily.
pub type Requests = Box<dyn Iterator<Item = Result<Request, TraceError>> + Send>;
/// Accesses of one pass over a trace.
pub type AccessStream<'a> = Box<dyn Iterator<Item = Result<Access, TraceError>> + Send + 'a>;

impl TraceSource {
    /// `trace` with the default settings.
    pub fn new(trace: impl Into<TraceInput>) -> TraceSource {
        TraceSource {
            trace: trace.into(),
            format: None,
            columns: None,
            ignore_obj_size: false,
            mode: None,
            block_size: DEFAULT_BLOCK_SIZE,
            requests: DEFAULT_REQUESTS,
            seed: DEFAULT_SEED,
            cancel: None,
            names: OptionNames::default(),
        }
    }

    /// The same settings for another trace.
    pub fn with_trace(&self, trace: impl Into<TraceInput>) -> TraceSource {
        TraceSource { trace: trace.into(), ..self.clone() }
    }

    /// The workload of a `synth:` trace.
    pub fn synth(&self) -> Option<&str> {
        self.trace.synth()
    }

    /// A synthetic workload (a block trace) asked for in object mode: refused.
    pub fn synth_in_object_mode(&self) -> bool {
        self.synth().is_some() && self.mode == Some(ModeChoice::Object)
    }

    /// The trace file's format, as given or as its name tells (`None` for a
    /// synthetic workload or a name that does not tell).
    pub fn format(&self) -> Option<Format> {
        let file = self.trace.file()?;
        let by_columns = self.columns.as_ref().map(|c| if c.layout.is_some() { Format::Binary } else { Format::Csv });
        self.format.or(by_columns).or_else(|| Format::detect(file))
    }

    /// Whether every object of the trace has size 1 in `mode`, so that cache
    /// sizes may count objects.
    pub fn unit_objects(&self, mode: Mode) -> bool {
        mode == Mode::Object && (self.ignore_obj_size || self.format().is_some_and(Format::is_unit_sized))
    }

    /// Opens the trace or generator (detecting a file's format unless given)
    /// and picks the mode. With `cancel` set, the requests stop once it is.
    pub fn open(&self) -> Result<(Requests, Mode), SourceError> {
        let (requests, mode) = self.open_uncancelled()?;
        Ok(match &self.cancel {
            Some(cancel) => {
                let cancel = Arc::clone(cancel);
                (Box::new(requests.take_while(move |_| !cancel.load(Ordering::Relaxed))), mode)
            }
            None => (requests, mode),
        })
    }

    fn open_uncancelled(&self) -> Result<(Requests, Mode), SourceError> {
        let block_size = u32::try_from(self.block_size)
            .ok()
            .filter(|&b| b > 0)
            .ok_or(SourceError::BlockSize { flag: self.names.block_size })?;
        let file = match &self.trace {
            TraceInput::File(file) => file,
            TraceInput::Synth(spec) => return self.open_synth(spec, block_size),
        };
        let reader = hearth_trace::open_with(file, self.format, self.columns.as_ref())?;
        let format = reader.format();
        let mode = match self.mode {
            None => format.mode(block_size),
            Some(ModeChoice::Object) => Mode::Object,
            Some(ModeChoice::Block) if format.is_object_trace() => {
                return Err(SourceError::ObjectTraceInBlockMode {
                    trace: file.clone(),
                    format,
                    flag: self.names.object_mode,
                })
            }
            Some(ModeChoice::Block) => Mode::Block { block_size },
        };
        if self.ignore_obj_size {
            if mode != Mode::Object {
                let (flag, object_mode) = (self.names.ignore_obj_size, self.names.object_mode);
                return Err(SourceError::IgnoreSizeInBlockMode { flag, object_mode });
            }
            return Ok((Box::new(reader.map(|r| r.map(|r| Request { len: 1, ..r }))), mode));
        }
        Ok((Box::new(reader), mode))
    }

    fn open_synth(&self, spec: &str, block_size: u32) -> Result<(Requests, Mode), SourceError> {
        if self.synth_in_object_mode() {
            return Err(SourceError::SynthInObjectMode { flag: self.names.object_mode });
        }
        let n = self.requests;
        let requests: Requests = if spec == "oltp" {
            let cfg = OltpConfig { seed: self.seed, ..OltpConfig::default() };
            Box::new(Oltp::new(cfg)?.take(n).map(Ok))
        } else {
            let pattern: Pattern = spec.parse()?;
            let synth = Synth::new(pattern, self.seed)?.block_size(block_size);
            Box::new(synth.take(n).map(Ok))
        };
        Ok((requests, Mode::Block { block_size }))
    }

    /// oracleGeneral and lcs traces carry each request's next use; in object
    /// mode that is each access's.
    pub fn records_next_access(&self, mode: Mode) -> bool {
        mode == Mode::Object && self.format().is_some_and(Format::records_next_access)
    }

    /// Whether passes may decode an oracleGeneral file straight from its read
    /// buffer ([`SampledOracle`]), as it is written.
    pub fn decodes_oracle_in_place(&self, mode: Mode) -> bool {
        mode == Mode::Object && self.format() == Some(Format::OracleGeneral) && !self.ignore_obj_size
    }
}

/// Progress of long work, for a front end to show (a bar, a counter).
/// Every method does nothing by default; `()` shows nothing.
pub trait Progress: Sync {
    /// A stage begins (`"reading"`, `"simulating"`...), with the units it
    /// will count when known.
    fn begin(&self, _stage: &str, _total: Option<u64>) {}
    /// `n` more units of the current stage are done.
    fn advance(&self, _n: u64) {}
    /// The time the current stage has left, as measured (the simulation's
    /// slowest worker at its own pace), when known.
    fn remaining(&self, _left: std::time::Duration) {}
    /// The current stage is over.
    fn end(&self) {}
}

impl Progress for () {}

/// What the caller needs before its passes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Needs {
    /// The footprint or the access count (sizes or warm-up as shares).
    pub totals: bool,
    /// Each access's next use (offline policies).
    pub next_access: bool,
}

/// A trace ready to be streamed.
pub struct Streamed<'a> {
    source: &'a TraceSource,
    pub mode: Mode,
    /// The first pass, if one was needed.
    pub scan: Option<Scan>,
    /// Applied to every key a pass hands out (sampled passes hash the
    /// renamed key): another draw of every sample.
    renaming: KeyRenaming,
}

impl<'a> Streamed<'a> {
    /// How many accesses the stream holds, when known before it is read: from
    /// the first pass, or for a synthetic pattern (one block a request).
    /// Progress bars show an ETA from it.
    pub fn known_accesses(&self) -> Option<u64> {
        match (&self.scan, self.source.synth()) {
            (Some(scan), _) => Some(scan.accesses),
            (None, Some(spec)) if spec != "oltp" => Some(self.source.requests as u64),
            _ => None,
        }
    }

    /// Opens the trace and runs the first pass if `needs` asks for anything
    /// the trace does not record itself.
    pub fn open(source: &'a TraceSource, needs: Needs, progress: &dyn Progress) -> Result<Streamed<'a>, SourceError> {
        let (requests, mode) = source.open()?;
        let build_next = needs.next_access && !source.records_next_access(mode);
        if !needs.totals && !build_next {
            return Ok(Streamed { source, mode, scan: None, renaming: KeyRenaming::IDENTITY });
        }
        progress.begin(if build_next { "reading (next uses for OPT)" } else { "reading" }, None);
        let dir = std::env::temp_dir();
        let accesses = hearth_trace::accesses(requests, mode);
        let scan = scan(accesses, build_next.then_some(dir.as_path()), &|n| progress.advance(n))?;
        progress.end();
        Ok(Streamed { source, mode, scan: Some(scan), renaming: KeyRenaming::IDENTITY })
    }

    /// Renames every key of the passes from now on: sampled passes draw
    /// another sample ([`KeyRenaming`]); [`KeyRenaming::IDENTITY`] undoes it.
    pub fn set_renaming(&mut self, renaming: KeyRenaming) {
        self.renaming = renaming;
    }

    /// A fresh pass over the trace's accesses, with next uses filled when
    /// the first pass built them.
    pub fn accesses(&self) -> Result<AccessStream<'_>, SourceError> {
        let (requests, _) = self.source.open()?;
        let accesses = hearth_trace::accesses(requests, self.mode);
        let accesses: AccessStream<'_> = match self.scan.as_ref().and_then(|s| s.next_access.as_ref()) {
            Some(column) => Box::new(with_next_access(accesses, column)?),
            None => Box::new(accesses),
        };
        if self.renaming.is_identity() {
            return Ok(accesses);
        }
        let renaming = self.renaming;
        Ok(Box::new(accesses.map(move |a| a.map(|a| Access { key: renaming.rename(a.key), ..a }))))
    }

    /// A fresh pass over the accesses whose keys
    /// [`hearth_trace::sample::keeps`] keeps at `threshold`, counting the
    /// others. An oracleGeneral file in object mode is sampled before
    /// decoding (only a kept record is decoded); any other trace is decoded
    /// and filtered. Next uses are filled as [`accesses`](Self::accesses) fills them.
    pub fn sampled_accesses(&self, threshold: u64) -> Result<SampledStream<'_>, SourceError> {
        self.sampled_accesses_with(threshold, AlwaysKept::default())
    }

    /// As [`sampled_accesses`](Self::sampled_accesses), also keeping
    /// `always`'s keys (a stratified sample's exact stratum).
    pub fn sampled_accesses_with(&self, threshold: u64, always: AlwaysKept) -> Result<SampledStream<'_>, SourceError> {
        let in_place = self.source.trace.file().filter(|_| self.source.decodes_oracle_in_place(self.mode));
        let from = if let Some(file) = in_place {
            let oracle = SampledOracle::open(file, threshold, self.renaming)?;
            Sampling::Oracle(oracle.always_keeping(always))
        } else {
            Sampling::Filtered { accesses: self.accesses()?, threshold, always, skipped: Skipped::default() }
        };
        Ok(SampledStream { from, cancel: self.source.cancel.clone() })
    }

    /// Whether every access of a pass carries its next use (from the trace
    /// or the first pass's column).
    pub fn records_next_access(&self) -> bool {
        self.source.records_next_access(self.mode) || self.scan.as_ref().is_some_and(|s| s.next_access.is_some())
    }

    /// `size` in bytes for this trace: its footprint (from the first pass),
    /// its block size, and whether its objects all count as one.
    pub fn resolve(&self, size: CacheSize) -> Result<u64, crate::SettingError> {
        size.resolve_objects(self.footprint_bytes(), self.block_size(), self.source.unit_objects(self.mode))
    }

    pub fn block_size(&self) -> Option<u32> {
        match self.mode {
            Mode::Block { block_size } => Some(block_size),
            Mode::Object => None,
        }
    }

    /// The footprint, which the first pass measured (callers ask for it
    /// through [`Needs::totals`]).
    pub fn footprint_bytes(&self) -> u64 {
        self.scan.as_ref().map_or(0, |s| s.footprint_bytes)
    }

    /// Accesses counted by the first pass (0 without one).
    pub fn accesses_counted(&self) -> u64 {
        self.scan.as_ref().map_or(0, |s| s.accesses)
    }

    pub fn source(&self) -> &TraceSource {
        self.source
    }

    pub fn trace(&self) -> &TraceInput {
        &self.source.trace
    }
}

/// The accesses of one sampled pass ([`Streamed::sampled_accesses`]).
pub struct SampledStream<'a> {
    from: Sampling<'a>,
    cancel: Option<Arc<AtomicBool>>,
}

enum Sampling<'a> {
    /// Keys hashed in the read buffer, before decoding.
    Oracle(SampledOracle),
    /// Every access decoded, then filtered.
    Filtered { accesses: AccessStream<'a>, threshold: u64, always: AlwaysKept, skipped: Skipped },
}

impl SampledStream<'_> {
    /// The requests (and bytes) not kept so far; with the kept ones, the
    /// whole stream's totals.
    pub fn skipped(&self) -> Skipped {
        match &self.from {
            Sampling::Oracle(oracle) => oracle.skipped(),
            Sampling::Filtered { skipped, .. } => *skipped,
        }
    }

    /// Hands the accesses kept to `consume` a batch at a time, in order,
    /// until the end, the first error or a cancel, each access with its
    /// place among the always-kept keys and each batch with what was not
    /// kept so far ([`KeptBatch`]). An oracleGeneral file's batches are
    /// decoded in place from its read buffer, with no step per access in
    /// between.
    pub fn for_each_batch(&mut self, mut consume: impl FnMut(KeptBatch)) -> Result<(), TraceError> {
        if let Sampling::Oracle(oracle) = &mut self.from {
            while let Some(batch) = oracle.next_kept() {
                if self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
                    return Ok(());
                }
                consume(batch?);
            }
            return Ok(());
        }
        let (mut accesses, mut places) = (Vec::with_capacity(crate::stream::CHUNK_ACCESSES), Vec::new());
        let mut hand = |accesses: &mut Vec<Access>, places: &mut Vec<Option<u32>>, skipped| {
            consume(KeptBatch { accesses, places, skipped });
            accesses.clear();
            places.clear();
        };
        let Sampling::Filtered { accesses: from, threshold, always, skipped } = &mut self.from else {
            unreachable!("the oracleGeneral reader returned above");
        };
        let cancelled = || self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed));
        // A cancel ends the stream as the iterator's does: what was kept
        // before it is still handed over.
        while !cancelled() {
            let Some((a, place)) = next_kept(from, *threshold, always, skipped) else {
                break;
            };
            accesses.push(a?);
            places.push(place);
            if accesses.len() == accesses.capacity() {
                hand(&mut accesses, &mut places, *skipped);
            }
        }
        if !accesses.is_empty() {
            hand(&mut accesses, &mut places, *skipped);
        }
        Ok(())
    }
}

/// The next access of a decoded stream that `threshold` or `always` keeps
/// (an error ends the stream), with its place among `always`'s keys;
/// `skipped` counts the others.
fn next_kept(
    accesses: &mut AccessStream,
    threshold: u64,
    always: &AlwaysKept,
    skipped: &mut Skipped,
) -> Option<(Result<Access, TraceError>, Option<u32>)> {
    loop {
        match accesses.next()? {
            Ok(a) => match sample::kept_place(a.key, threshold, always) {
                Some(place) => return Some((Ok(a), place)),
                None => {
                    skipped.requests += 1;
                    skipped.bytes += u64::from(a.size);
                }
            },
            Err(e) => return Some((Err(e), None)),
        }
    }
}

impl Iterator for SampledStream<'_> {
    type Item = Result<Access, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return None;
        }
        match &mut self.from {
            Sampling::Oracle(oracle) => oracle.next(),
            Sampling::Filtered { accesses, threshold, always, skipped } => {
                next_kept(accesses, *threshold, always, skipped).map(|(a, _)| a)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python_names() -> OptionNames {
        OptionNames { block_size: "block_size", object_mode: "mode='object'", ignore_obj_size: "ignore_obj_size" }
    }

    #[test]
    fn a_trace_is_told_apart_once_and_names_itself_as_given() {
        let synth = TraceInput::from("synth:zipf:1000:0.9");
        assert_eq!(synth, TraceInput::Synth("zipf:1000:0.9".into()));
        assert_eq!(synth.to_string(), "synth:zipf:1000:0.9");
        assert_eq!((synth.file(), synth.synth()), (None, Some("zipf:1000:0.9")));
        let file = TraceInput::from(Path::new("dir/synth:x.csv"));
        assert_eq!(file, TraceInput::File("dir/synth:x.csv".into()), "only a leading synth: is a generator");
        assert_eq!(file.to_string(), "dir/synth:x.csv");
        assert_eq!(file.clone().beside(Path::new("/d")), TraceInput::File("/d/dir/synth:x.csv".into()));
        assert_eq!(synth.clone().beside(Path::new("/d")), synth);
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt;
            let raw = OsString::from_vec(b"synth:\xff".to_vec());
            assert_eq!(TraceInput::from(raw.clone()), TraceInput::File(raw.into()), "not UTF-8: a file name");
        }
    }

    #[test]
    fn a_bad_synthetic_spec_is_reported_when_opened() {
        let err = TraceSource::new("synth:zipf:x").open().err().expect("refused");
        let from_generator = "synth:zipf:x".strip_prefix("synth:").unwrap().parse::<Pattern>().unwrap_err();
        assert_eq!(err.to_string(), from_generator.to_string());
    }

    #[test]
    fn the_access_count_is_known_ahead_for_synthetic_patterns_and_after_a_first_pass() {
        let mut s = TraceSource::new("synth:uniform:300");
        s.requests = 1234;
        let streamed = Streamed::open(&s, Needs::default(), &()).unwrap();
        assert_eq!(streamed.known_accesses(), Some(1234));
        assert_eq!(streamed.accesses().unwrap().count(), 1234);
        // OLTP pages need not be one block each; a first pass counts them.
        let oltp = TraceSource { requests: 50, block_size: 512, ..TraceSource::new("synth:oltp") };
        assert_eq!(Streamed::open(&oltp, Needs::default(), &()).unwrap().known_accesses(), None);
        let scanned = Streamed::open(&oltp, Needs { totals: true, next_access: false }, &()).unwrap();
        assert_eq!(scanned.known_accesses(), Some(scanned.accesses().unwrap().count() as u64));
    }

    /// A sampled pass keeps what filtering a full pass keeps, with the same
    /// vtimes and next uses, and counts the rest: through the oracleGeneral
    /// fast path and through decoding.
    #[test]
    fn sampled_passes_equal_filtered_full_passes() {
        let dir = tempfile::tempdir().unwrap();
        let oracle = dir.path().join("t.oracleGeneral.bin");
        let mut zipf = TraceSource::new("synth:zipf:5000:0.9");
        zipf.requests = 30_000;
        let block = Streamed::open(&zipf, Needs::default(), &()).unwrap();
        let mut accesses: Vec<Access> = block.accesses().unwrap().map(Result::unwrap).collect();
        hearth_trace::fill_next_access(&mut accesses);
        hearth_trace::write_oracle_general(&oracle, &accesses).unwrap();
        let object = TraceSource::new(&oracle);
        let threshold = sample::threshold(0.05);
        for source in [&zipf, &object] {
            let trace = Streamed::open(source, Needs { totals: true, next_access: true }, &()).unwrap();
            let all: Vec<Access> = trace.accesses().unwrap().map(Result::unwrap).collect();
            let mut sampled = trace.sampled_accesses(threshold).unwrap();
            let kept: Vec<Access> = sampled.by_ref().map(Result::unwrap).collect();
            let expected: Vec<Access> = all.iter().copied().filter(|a| sample::keeps(a.key, threshold)).collect();
            assert!(!kept.is_empty() && kept.len() < all.len() / 5, "{}", source.trace.display());
            assert_eq!(kept, expected, "{}", source.trace.display());
            let skipped = sampled.skipped();
            assert_eq!(skipped.requests as usize + kept.len(), all.len());
            let bytes = |a: &[Access]| a.iter().map(|a| u64::from(a.size)).sum::<u64>();
            assert_eq!(skipped.bytes + bytes(&kept), bytes(&all));
            // Batches hand out the same accesses, the whole pass at rate 1.
            let mut batched = Vec::new();
            let mut every = trace.sampled_accesses(u64::MAX).unwrap();
            every.for_each_batch(|batch| batched.extend_from_slice(batch.accesses)).unwrap();
            assert_eq!(batched, all, "{}", source.trace.display());
            assert_eq!(every.skipped(), sample::Skipped::default());
            // Keys kept whatever their hash join the batches, each access
            // with its place among them.
            let unsampled = all.iter().map(|a| a.key).filter(|&k| !sample::keeps(k, threshold));
            let hot = AlwaysKept::new(unsampled.step_by(7).take(20));
            let (mut got, mut places) = (Vec::new(), Vec::new());
            let mut stratified = trace.sampled_accesses_with(threshold, hot.clone()).unwrap();
            stratified
                .for_each_batch(|batch| {
                    got.extend_from_slice(batch.accesses);
                    places.extend_from_slice(batch.places);
                })
                .unwrap();
            let expected: Vec<Access> =
                all.iter().copied().filter(|a| sample::keeps(a.key, threshold) || hot.contains(a.key)).collect();
            assert_eq!(got, expected, "{}", source.trace.display());
            let expected: Vec<Option<u32>> = got.iter().map(|a| hot.position(a.key).map(|p| p as u32)).collect();
            assert_eq!(places, expected, "{}", source.trace.display());
            assert!(places.iter().flatten().count() > kept.len() / 10, "hot accesses in {}", source.trace.display());
        }
    }

    #[test]
    fn synthetic_workloads_are_block_traces_of_the_given_length() {
        let mut s = TraceSource::new("synth:zipf:1000:0.9");
        s.requests = 5000;
        s.block_size = 512;
        let (requests, mode) = s.open().unwrap();
        assert_eq!(mode, Mode::Block { block_size: 512 });
        assert_eq!(requests.count(), 5000);
        assert_eq!(s.format(), None);
        // The same seed gives the same requests; a pass is repeatable.
        let keys = |s: &TraceSource| -> Vec<u64> {
            let (r, m) = s.open().unwrap();
            hearth_trace::accesses(r, m).map(|a| a.unwrap().key).take(100).collect()
        };
        assert_eq!(keys(&s), keys(&s));
        s.seed = 7;
        assert_ne!(keys(&s), keys(&TraceSource { seed: 42, ..s.clone() }));
    }

    #[test]
    fn bad_settings_are_named_as_the_front_end_spells_them() {
        let mut s = TraceSource::new("synth:scan");
        s.mode = Some(ModeChoice::Object);
        s.names = python_names();
        let err = s.open().err().unwrap().to_string();
        assert_eq!(err, "synthetic workloads are block traces; drop mode='object'");
        let mut s = TraceSource::new("synth:scan");
        s.block_size = 0;
        s.names = OptionNames {
            block_size: "--block-size",
            object_mode: "--mode object",
            ignore_obj_size: "--ignore-obj-size",
        };
        let err = s.open().err().unwrap().to_string();
        assert_eq!(err, "--block-size must be between 1 B and 4 GiB");
        assert!(TraceSource::new("synth:nope").open().is_err());
        assert_eq!("Object".parse::<ModeChoice>(), Ok(ModeChoice::Object));
        assert!("blocks".parse::<ModeChoice>().unwrap_err().to_string().contains("mode must be"));
    }

    #[test]
    fn files_open_with_their_format_and_mode_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ids.txt");
        std::fs::write(&path, "1\n2\n1\n3\n").unwrap();
        let s = TraceSource::new(&path);
        let (requests, mode) = s.open().unwrap();
        assert_eq!((requests.count(), mode), (4, Mode::Object));
        let block = TraceSource { mode: Some(ModeChoice::Block), ..s.clone() };
        let err = block.open().err().unwrap().to_string();
        assert!(err.contains("is an object trace") && err.contains("ids.txt"), "{err}");
        let missing = s.with_trace(dir.path().join("nope.txt"));
        assert!(matches!(missing.open(), Err(SourceError::Trace(_))));
    }

    #[test]
    fn the_first_pass_runs_only_when_needed_and_cancel_ends_passes() {
        let mut s = TraceSource::new("synth:loop:100");
        s.requests = 1000;
        let plain = Streamed::open(&s, Needs::default(), &()).unwrap();
        assert!(plain.scan.is_none() && !plain.records_next_access());
        let scanned = Streamed::open(&s, Needs { totals: true, next_access: true }, &()).unwrap();
        assert_eq!((scanned.accesses_counted(), scanned.footprint_bytes()), (1000, 100 * 4096));
        assert!(scanned.records_next_access());
        let firsts: Vec<u64> = scanned.accesses().unwrap().take(2).map(|a| a.unwrap().next_access).collect();
        assert_eq!(firsts, vec![100, 101]);
        let cancel = Arc::new(AtomicBool::new(true));
        let s = TraceSource { cancel: Some(cancel), ..s };
        assert_eq!(Streamed::open(&s, Needs::default(), &()).unwrap().accesses().unwrap().count(), 0);
    }
}

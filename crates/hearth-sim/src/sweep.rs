//! Sweeps: traces × policies × sizes described in a small TOML file, split
//! into one task per (trace, policy) with every size, run on a pool of
//! threads, and put back into one table in the order of `hearth sim --json`
//! (trace, then size, then policy). `hearth sweep FILE` runs one; the Python
//! package reads the same file (`hearth.sweep(config=FILE)`).
//!
//! ```toml
//! traces = ["a.oracleGeneral.bin", "synth:zipf:100000:0.9"]   # relative to this file
//! policies = ["lru", "arc", "mq:m=8,lifetime=5000"]             # or "lru,arc"; "all"
//! sizes = "1%,5%,64MiB"                                         # or ["1%", "5%"]
//! mode = "object"          # optional: block | object
//! warmup = "10%"           # optional: a count or a share
//! output = "results.csv"   # optional: .csv or .json (and .parquet from Python)
//! workers = 4              # optional: threads (default one per core)
//! # also: format, block_size, requests, seed, as for `hearth sim`
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::run::{simulate, Row, Simulation, Warmup};
use crate::size::parse_sizes;
use crate::source::{ModeChoice, OptionNames, Progress, SourceError, TraceInput, TraceSource};
use crate::SimResult;

/// A string or a list of strings.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum Strings {
    One(String),
    Many(Vec<String>),
}

impl Strings {
    /// The strings as written, each possibly a comma-separated list.
    fn lists(&self) -> Vec<String> {
        match self {
            Strings::One(s) => vec![s.clone()],
            Strings::Many(v) => v.clone(),
        }
    }
    /// The comma-separated items of every string.
    fn pieces(&self) -> Vec<String> {
        self.lists().iter().flat_map(|s| s.split(',')).map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
    }
}

/// A string or an integer (`warmup = 1000`, `block_size = 4096`).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum Text {
    Int(u64),
    Str(String),
}

impl Text {
    fn text(&self) -> String {
        match self {
            Text::Int(n) => n.to_string(),
            Text::Str(s) => s.clone(),
        }
    }
}

/// The file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    traces: Strings,
    policies: Strings,
    sizes: Strings,
    mode: Option<String>,
    warmup: Option<Text>,
    format: Option<String>,
    block_size: Option<Text>,
    requests: Option<usize>,
    seed: Option<u64>,
    output: Option<String>,
    workers: Option<usize>,
}

/// A sweep, read and checked.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The traces (paths relative to the sweep file made relative to where
    /// it is read from), each with the file's reading options.
    pub sources: Vec<TraceSource>,
    /// The simulation run on each trace (policy specs expanded).
    pub sim: Simulation,
    /// The sizes as written (`"1%,5%"`).
    pub sizes: String,
    /// The warm-up as written.
    pub warmup: Option<String>,
    /// The mode as written.
    pub mode: Option<String>,
    pub format: Option<String>,
    pub block_size: Option<String>,
    pub output: Option<PathBuf>,
    pub workers: Option<usize>,
}

/// How sweep files name their settings in errors.
const NAMES: OptionNames =
    OptionNames { block_size: "block_size", object_mode: "mode = \"object\"", ignore_obj_size: "ignore_obj_size" };

/// `path` as seen from the directory the sweep file is read from, unless absolute.
fn beside(dir: &Path, path: &str) -> PathBuf {
    dir.join(path)
}

impl Sweep {
    /// Reads a sweep file; relative paths in it are relative to its directory.
    pub fn load(path: &Path) -> Result<Sweep, SourceError> {
        let in_file = |error| SourceError::SweepFile { file: path.to_path_buf(), error: Box::new(error) };
        let text = std::fs::read_to_string(path).map_err(|e| in_file(SourceError::SweepRead(e)))?;
        let dir = path.parent().unwrap_or(Path::new(""));
        Sweep::parse(&text, dir).map_err(in_file)
    }

    /// Reads a sweep from TOML text whose relative paths are relative to `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<Sweep, SourceError> {
        let file: SweepFile = toml::from_str(text).map_err(|e| SourceError::SweepToml(e.message().to_string()))?;
        let traces = file.traces.pieces();
        if traces.is_empty() {
            return Err(SourceError::NoTraces);
        }
        let policies = hearth_policy::parse_list(&file.policies.lists().join(","))?;
        if policies.is_empty() {
            return Err(SourceError::NoPolicies);
        }
        let sizes_text = file.sizes.pieces().join(",");
        let sizes = parse_sizes(&sizes_text).map_err(SourceError::Sizes)?;
        let warmup_text = file.warmup.as_ref().map(Text::text);
        let warmup = warmup_text.as_deref().map(str::parse::<Warmup>).transpose().map_err(SourceError::Warmup)?;
        let mut base = TraceSource::new("");
        base.names = NAMES;
        base.mode = file.mode.as_deref().map(str::parse::<ModeChoice>).transpose()?;
        base.format = file.format.as_deref().map(str::parse).transpose()?;
        let block_size_text = file.block_size.as_ref().map(Text::text);
        if let Some(b) = &block_size_text {
            base.block_size = hearth_core::parse_bytes(b).map_err(SourceError::SweepBlockSize)?;
        }
        base.requests = file.requests.unwrap_or(base.requests);
        base.seed = file.seed.unwrap_or(base.seed);
        if file.workers == Some(0) {
            return Err(SourceError::NoWorkers);
        }
        let output = file.output.as_deref().map(|o| beside(dir, o));
        let sources: Vec<TraceSource> =
            traces.iter().map(|t| base.with_trace(TraceInput::from(t.as_str()).beside(dir))).collect();
        // Refused here, not when its task comes up after every other trace has run.
        if let Some(synth) = sources.iter().find(|s| s.synth_in_object_mode()) {
            return Err(SourceError::SynthInObjectSweep(synth.trace.clone()));
        }
        Ok(Sweep {
            sources,
            sim: Simulation { policies, sizes, warmup, interval: None },
            sizes: sizes_text,
            warmup: warmup_text,
            mode: file.mode,
            format: file.format,
            block_size: block_size_text,
            output,
            workers: file.workers,
        })
    }

    /// The tasks: (trace index, policy index), traces outer.
    pub fn tasks(&self) -> Vec<(usize, usize)> {
        let policies = self.sim.policies.len();
        (0..self.sources.len()).flat_map(|t| (0..policies).map(move |p| (t, p))).collect()
    }

    /// Runs every task on `workers` threads (each task on one), reporting
    /// tasks done to `progress`, and returns the rows in the order of
    /// `hearth sim --json` over the same traces. The first failing task's
    /// error (in task order) is returned.
    pub fn run(&self, workers: usize, progress: &dyn Progress) -> Result<Vec<Row>, SourceError> {
        let tasks = self.tasks();
        progress.begin("sweep tasks", Some(tasks.len() as u64));
        let done = crate::parallel_map(&tasks, workers, |&(t, p)| {
            let sim = Simulation { policies: vec![self.sim.policies[p].clone()], ..self.sim.clone() };
            let r = simulate(&self.sources[t], &sim, 1, &()).map(|run| run.results);
            progress.advance(1);
            r
        });
        progress.end();
        let mut results: Vec<Vec<SimResult>> = Vec::with_capacity(done.len());
        for r in done {
            results.push(r?);
        }
        let policies = self.sim.policies.len();
        let mut rows = Vec::with_capacity(results.iter().map(Vec::len).sum());
        for (t, source) in self.sources.iter().enumerate() {
            let name = source.trace.display().to_string();
            let mine = &results[t * policies..(t + 1) * policies];
            for s in 0..mine[0].len() {
                for per_policy in mine {
                    rows.push(Row { trace: name.clone(), result: per_policy[s].clone() });
                }
            }
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Progress;
    use std::sync::atomic::{AtomicU64, Ordering};

    const FILE: &str = r#"
traces = ["synth:zipf:3000:0.8", "synth:loop:500"]
policies = "lru,mq:m=4,lifetime=100"
sizes = ["5%", "100blocks"]
warmup = 1000
requests = 20000
seed = 7
output = "out/sweep.csv"
"#;

    struct Count(AtomicU64);
    impl Progress for Count {
        fn advance(&self, n: u64) {
            self.0.fetch_add(n, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_sweep_file_reads_into_sources_and_one_simulation() {
        let sweep = Sweep::parse(FILE, Path::new("/data")).unwrap();
        assert_eq!(
            sweep.sim.policies.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["lru", "mq:m=4,lifetime=100"]
        );
        assert_eq!(sweep.sizes, "5%,100blocks");
        assert_eq!(sweep.sim.warmup, Some(Warmup::Accesses(1000)));
        assert_eq!(sweep.output, Some(PathBuf::from("/data/out/sweep.csv")));
        assert_eq!(sweep.sources[0].trace, TraceInput::Synth("zipf:3000:0.8".into()));
        assert_eq!(sweep.sources[1].trace, TraceInput::Synth("loop:500".into()));
        assert_eq!((sweep.sources[0].requests, sweep.sources[0].seed), (20000, 7));
        assert_eq!(sweep.tasks(), vec![(0, 0), (0, 1), (1, 0), (1, 1)]);
        let relative =
            Sweep::parse("traces = \"a.bin\"\npolicies = \"lru\"\nsizes = \"1%\"", Path::new("/data")).unwrap();
        assert_eq!(relative.sources[0].trace, TraceInput::File("/data/a.bin".into()));

        for (bad, says) in [
            ("traces = []\npolicies = \"lru\"\nsizes = \"1%\"", "no traces"),
            ("traces = \"a\"\npolicies = \"nope\"\nsizes = \"1%\"", "unknown policy"),
            ("traces = \"a\"\npolicies = \"lru\"\nsizes = \"x%\"", "sizes: bad percentage"),
            ("traces = \"a\"\npolicies = \"lru\"\nsizes = \"1%\"\nwarmup = \"lots\"", "warmup:"),
            ("traces = \"a\"\npolicies = \"lru\"\nsizes = \"1%\"\nmode = \"blocks\"", "mode must be"),
            ("traces = \"a\"\npolicies = \"lru\"\nsizes = \"1%\"\nthreads = 2", "unknown field"),
            (
                "traces = [\"a.bin\", \"synth:loop:5\"]\npolicies = \"lru\"\nsizes = \"1%\"\nmode = \"object\"",
                "traces: synth:loop:5 is a synthetic workload, a block trace; drop mode = \"object\"",
            ),
        ] {
            let err = Sweep::parse(bad, Path::new("")).unwrap_err().to_string();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn a_sweep_equals_one_simulation_per_trace_in_the_same_order() {
        let sweep = Sweep::parse(FILE, Path::new("")).unwrap();
        let count = Count(AtomicU64::new(0));
        let rows = sweep.run(3, &count).unwrap();
        assert_eq!(count.0.load(Ordering::Relaxed), 4);
        let mut want = Vec::new();
        for source in &sweep.sources {
            want.extend(simulate(source, &sweep.sim, 2, &()).unwrap().rows());
        }
        assert_eq!(rows.len(), 2 * 2 * 2);
        assert_eq!(rows, want);
    }
}

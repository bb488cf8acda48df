//! `hearth._native`: the Rust half of the `hearth` Python package.
//!
//! Every simulation here runs through the same library code as `hearth sim`
//! and `hearth mrc` (`hearth_sim::stream::run_streaming`, the one-pass curves
//! of `hearth_sim::mrc`), streaming the trace in chunks, with the GIL released.
//! Policies written in Python (see `plugin.rs`) run on the caller's thread
//! with the GIL held. The pure-Python half (`python/hearth/`) turns the rows
//! returned here into DataFrames and runs sweeps.

mod plugin;
mod source;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_core::{Access, Key, Op, Policy, NEVER};
use hearth_policy::{PolicyList, PolicySpec};
use hearth_sim::mrc::{exact_pass, shards_pass, ShardsMode, HOT_KEYS, TRUSTED_SAMPLE_KEYS};
use hearth_sim::run::{Prepared, Warmup};
use hearth_sim::source::{ModeChoice, Needs, Streamed};
use hearth_sim::stream::{run_streaming, Counting, Replayer};
use hearth_sim::{mrc_grid, parse_sizes, simulate, CacheSize, Job, SimResult, Simulation, SourceError, TraceSource};
use hearth_trace::sample::KeyRenaming;
use hearth_trace::TraceError;
use pyo3::exceptions::{PyOSError, PyUserWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyType};

use plugin::{ErrorSlot, PyPolicy};
use source::{arg, cancel_flag, trace_source, Failure};

/// Converts a failure to the package's exceptions (`hearth._errors`), whose
/// text is the CLI's (`hearth: error: <text>`).
fn to_pyerr(py: Python<'_>, f: Failure) -> PyErr {
    let errors = py.import("hearth._errors").ok();
    let class = |name: &str| errors.as_ref().and_then(|m| m.getattr(name).ok());
    match f {
        Failure::Source(SourceError::Trace(e)) => trace_error(py, &e, class),
        other => {
            let msg = other.to_string();
            match class("ConfigError") {
                Some(c) => c.call1((msg,)).map_or_else(|e| e, PyErr::from_value),
                None => PyValueError::new_err(msg),
            }
        }
    }
}

fn trace_error<'py>(py: Python<'py>, e: &TraceError, class: impl Fn(&str) -> Option<Bound<'py, PyAny>>) -> PyErr {
    let io = e.io_error();
    let msg = e.to_string();
    let file = e.file().display().to_string();
    let made = (|| -> PyResult<PyErr> {
        let exc = match io {
            Some(io) => {
                let c = class("TraceIOError").ok_or_else(|| PyOSError::new_err(msg.clone()))?;
                let exc = c.call1((msg.clone(),))?;
                exc.setattr("errno", io.raw_os_error())?;
                exc.setattr("filename", &file)?;
                exc
            }
            None => {
                let c = class("TraceError").ok_or_else(|| PyValueError::new_err(msg.clone()))?;
                c.call1((msg.clone(),))?
            }
        };
        exc.setattr("file", &file)?;
        exc.setattr("line", e.line())?;
        exc.setattr("byte_offset", e.byte_offset())?;
        exc.setattr("reason", e.message())?;
        Ok(PyErr::from_value(exc))
    })();
    let _ = py;
    made.unwrap_or_else(|e| e)
}

/// `source::trace_source` with its failure as a Python exception.
#[allow(clippy::too_many_arguments)]
fn source_of(
    py: Python<'_>,
    trace: &str,
    format: Option<&str>,
    mode: Option<&str>,
    block_size: &str,
    requests: usize,
    seed: u64,
) -> PyResult<TraceSource> {
    trace_source(trace, format, mode, block_size, requests, seed).map_err(|f| to_pyerr(py, f))
}

/// Runs `f` on a thread of its own while this one, without the GIL, waits
/// for it and checks for signals every 100 ms: on Ctrl-C `cancel` ends the
/// trace's passes, and the signal's exception (KeyboardInterrupt) is raised.
fn interruptible<T: Send>(py: Python<'_>, cancel: &AtomicBool, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    std::thread::scope(|s| {
        let handle = s.spawn(f);
        loop {
            let finished = py.detach(|| {
                for _ in 0..20 {
                    if handle.is_finished() {
                        return true;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                false
            });
            if finished {
                return Ok(handle.join().expect("the simulation thread panicked"));
            }
            if let Err(e) = py.check_signals() {
                cancel.store(true, Ordering::Relaxed);
                py.detach(move || {
                    let _ = handle.join();
                });
                return Err(e);
            }
        }
    })
}

fn threads(threads: Option<usize>) -> usize {
    threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1)
}

/// A `--json` row: `trace` and the `SimResult` fields.
fn row<'py>(py: Python<'py>, trace: &str, r: &SimResult) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("trace", trace)?;
    d.set_item("policy", &r.policy)?;
    d.set_item("cache_bytes", r.cache_bytes)?;
    d.set_item("requests", r.requests)?;
    d.set_item("hits", r.hits)?;
    d.set_item("bytes", r.bytes)?;
    d.set_item("hit_bytes", r.hit_bytes)?;
    if !r.interval_miss_ratios.is_empty() {
        d.set_item("interval_miss_ratios", r.interval_miss_ratios.clone())?;
    }
    Ok(d)
}

/// The registered policies as (name, description) pairs.
#[pyfunction]
fn policies() -> Vec<(&'static str, &'static str)> {
    hearth_policy::describe()
}

/// The policy specs a spec string stands for, as `sim` and the command line
/// read it: comma-separated, parameters joined to their policy, `all` for
/// every registered policy. An unknown policy or bad parameter raises.
#[pyfunction]
fn policy_list(py: Python<'_>, spec: &str) -> PyResult<Vec<String>> {
    let specs = hearth_policy::parse_list(spec).map_err(|m| to_pyerr(py, m.into()))?;
    Ok(specs.iter().map(ToString::to_string).collect())
}

/// The sizes a size list stands for, as `sim` reads it (ranges expanded),
/// without a trace: `("share", fraction of the footprint)`, `("bytes", n)`,
/// `("blocks", n)` or `("objects", n)`. The sweep's memory hint is computed from these.
#[pyfunction]
fn cache_sizes(py: Python<'_>, sizes: &str) -> PyResult<Vec<(&'static str, f64)>> {
    let sizes = parse_sizes(sizes).map_err(|m| to_pyerr(py, arg(format!("sizes: {m}"))))?;
    Ok(sizes
        .into_iter()
        .map(|s| match s {
            CacheSize::Footprint(f) => ("share", f),
            CacheSize::Bytes(b) => ("bytes", b as f64),
            CacheSize::Blocks(n) => ("blocks", n as f64),
            CacheSize::Objects(n) => ("objects", n as f64),
        })
        .collect())
}

/// Whether `sim` replays `trace` in object mode: as `mode` says, else for an
/// oracleGeneral or text trace (by `format`, else by the file's name -- a
/// URL's too; the file is not opened).
#[pyfunction]
#[pyo3(signature = (trace, format=None, mode=None))]
fn object_mode(py: Python<'_>, trace: &str, format: Option<&str>, mode: Option<&str>) -> PyResult<bool> {
    let source = trace_source(trace, format, mode, "4KiB", 0, 0).map_err(|f| to_pyerr(py, f))?;
    Ok(match source.mode {
        Some(m) => m == ModeChoice::Object,
        None => source.format().is_some_and(|f| f.is_object_trace()),
    })
}

/// Whether a policy spec is offline (OPT, BeladySize: it reads next uses).
#[pyfunction]
fn offline_policy(py: Python<'_>, spec: &str) -> PyResult<bool> {
    let spec: PolicySpec = spec.parse().map_err(|m: hearth_policy::SpecError| to_pyerr(py, m.into()))?;
    Ok(spec.is_offline())
}

/// Runs policies over traces at cache sizes, as `hearth sim --json`: one
/// dict per (trace, size, policy), sizes outer, policies inner. `policies`
/// holds spec strings (comma lists allowed, `all` for every registered one)
/// and Python policy factories (called with the capacity in bytes).
#[pyfunction]
#[pyo3(signature = (traces, policies, sizes, *, mode=None, warmup=None, interval=None, format=None,
                    block_size="4KiB", requests=1_000_000, seed=42, threads=None))]
#[allow(clippy::too_many_arguments)]
fn sim<'py>(
    py: Python<'py>,
    traces: Vec<String>,
    policies: Vec<Bound<'py, PyAny>>,
    sizes: &str,
    mode: Option<&str>,
    warmup: Option<&str>,
    interval: Option<u64>,
    format: Option<&str>,
    block_size: &str,
    requests: usize,
    seed: u64,
    threads: Option<usize>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let fail = |f: Failure| to_pyerr(py, f);
    // Policies in order: spec strings or factories.
    let mut entries: Vec<Result<PolicySpec, usize>> = Vec::new();
    let mut factories: Vec<Bound<'py, PyAny>> = Vec::new();
    for p in &policies {
        if let Ok(s) = p.cast::<PyString>() {
            let specs = hearth_policy::parse_list(s.to_str()?).map_err(|m| fail(m.into()))?;
            entries.extend(specs.into_iter().map(Ok));
        } else if p.is_callable() {
            entries.push(Err(factories.len()));
            factories.push(p.clone());
        } else {
            let ty = p.get_type().name()?;
            return Err(PyValueError::new_err(format!(
                "a policy is a spec string ('lru', 'mq:m=8') or a Python policy class, not a {ty} instance"
            )));
        }
    }
    if entries.is_empty() {
        return Err(fail(arg("no policies given")));
    }
    let sizes = parse_sizes(sizes).map_err(|m| fail(arg(format!("sizes: {m}"))))?;
    let builtin: Vec<PolicySpec> = entries.iter().filter_map(|e| e.as_ref().ok().cloned()).collect();
    let warmup = warmup.map(str::parse::<Warmup>).transpose().map_err(|m| fail(arg(format!("warmup: {m}"))))?;
    let sim = Simulation { policies: builtin, sizes, warmup, interval };
    let threads = self::threads(threads);

    let mut rows = Vec::new();
    for trace in &traces {
        let source = source_of(py, trace, format, mode, block_size, requests, seed)?;
        let results = if factories.is_empty() {
            // Built-in policies only: the command line's run, without the GIL.
            interruptible(py, cancel_flag(&source), || simulate(&source, &sim, threads, &()))?
                .map_err(|e| fail(e.into()))?
                .results
        } else {
            with_plugins(py, &source, &sim, &entries, &factories, threads)?
        };
        for r in &results {
            rows.push(row(py, trace, r)?);
        }
    }
    Ok(rows)
}

/// A `sim` run of built-in and Python policies, in `entries`' order at each
/// size: the first pass and the built-in policies without the GIL, then
/// the Python policies on this thread with it.
fn with_plugins(
    py: Python<'_>,
    source: &TraceSource,
    sim: &Simulation,
    entries: &[Result<PolicySpec, usize>],
    factories: &[Bound<'_, PyAny>],
    threads: usize,
) -> PyResult<Vec<SimResult>> {
    let fail = |f: Failure| to_pyerr(py, f);
    let (prepared, builtin) = interruptible(py, cancel_flag(source), || -> Result<_, Failure> {
        let prepared = sim.prepare(source, &())?;
        let jobs = prepared.jobs(&sim.policies);
        let results = if jobs.is_empty() {
            Vec::new()
        } else {
            run_streaming(prepared.trace.accesses()?, &jobs, prepared.counting, threads, &|_| {})?
        };
        Ok((prepared, results))
    })?
    .map_err(fail)?;
    let plugin_jobs: Vec<(usize, u64)> = prepared
        .order(entries.len())
        .filter_map(|(s, e)| entries[e].as_ref().err().map(|&i| (i, prepared.cache_bytes[s])))
        .collect();
    let mut plugin_results = run_plugins(py, &prepared, factories, &plugin_jobs)?.into_iter();
    let mut builtin_results = builtin.into_iter();
    let ordered: Vec<SimResult> = prepared
        .order(entries.len())
        .map(|(_, e)| match entries[e] {
            Ok(_) => builtin_results.next().expect("one result per built-in job"),
            Err(_) => plugin_results.next().expect("one result per plugin job"),
        })
        .collect();
    prepared.check(&ordered).map_err(|e| fail(e.into()))?;
    Ok(ordered)
}

/// Accesses fed to Python policies between checks for errors and Ctrl-C.
const PLUGIN_CHUNK: usize = 4096;

/// Replays one pass of the trace through fresh instances of Python policies.
fn run_plugins(
    py: Python<'_>,
    prepared: &Prepared<'_>,
    factories: &[Bound<'_, PyAny>],
    jobs: &[(usize, u64)],
) -> PyResult<Vec<SimResult>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let counting: Counting = prepared.counting;
    let error: ErrorSlot = Arc::new(Mutex::new(None));
    let mut replayers = Vec::with_capacity(jobs.len());
    for &(i, capacity) in jobs {
        let obj = factories[i].call1((capacity,))?;
        let policy = PyPolicy::new(py, obj.unbind(), capacity, error.clone())?;
        replayers.push(Replayer::with_policy(Box::new(policy), counting));
    }
    let mut stream = prepared.trace.accesses().map_err(|f| to_pyerr(py, f.into()))?;
    let mut chunk: Vec<Access> = Vec::with_capacity(PLUGIN_CHUNK);
    loop {
        chunk.clear();
        for a in stream.by_ref().take(PLUGIN_CHUNK) {
            chunk.push(a.map_err(|e| to_pyerr(py, e.into()))?);
        }
        if chunk.is_empty() {
            break;
        }
        for r in &mut replayers {
            r.feed(&chunk);
            if let Some(e) = error.lock().unwrap().take() {
                return Err(e);
            }
        }
        py.check_signals()?;
    }
    Ok(replayers.into_iter().map(Replayer::finish).collect())
}

/// A sweep file (TOML, as `hearth sweep` reads it), read and checked by
/// `hearth_sim::sweep`: a dict of `traces` (relative paths made relative to
/// the file's directory), `policies` (expanded), `sizes`, and the optional
/// `mode`, `warmup`, `format`, `block_size`, `requests`, `seed`, `output`
/// and `workers` (None when not set).
#[pyfunction]
fn sweep_file<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let s = hearth_sim::sweep::Sweep::load(&path).map_err(|f| to_pyerr(py, f.into()))?;
    let d = PyDict::new(py);
    let traces: Vec<String> = s.sources.iter().map(|t| t.trace.display().to_string()).collect();
    d.set_item("traces", traces)?;
    let policies: Vec<String> = s.sim.policies.iter().map(ToString::to_string).collect();
    d.set_item("policies", policies)?;
    d.set_item("sizes", &s.sizes)?;
    d.set_item("mode", &s.mode)?;
    d.set_item("warmup", &s.warmup)?;
    d.set_item("format", &s.format)?;
    d.set_item("block_size", &s.block_size)?;
    let first = s.sources.first();
    d.set_item("requests", first.map(|t| t.requests))?;
    d.set_item("seed", first.map(|t| t.seed))?;
    d.set_item("output", s.output.as_ref().map(|o| o.display().to_string()))?;
    d.set_item("workers", s.workers)?;
    Ok(d)
}

/// One method's curve for one policy: method, sampling rate, seconds, points.
type Curve = (String, f64, f64, Vec<SimResult>);

/// Miss-ratio curves as `hearth mrc --json`, one dict per point with the
/// curve's `method`, `rate` and `seconds`.
#[pyfunction]
#[pyo3(signature = (trace, methods, policies, sizes=None, *, rate="1%", shards_items=None, shards_hot_keys=HOT_KEYS,
                    sample_seed=0, mode=None, format=None, block_size="4KiB", requests=1_000_000, seed=42, threads=None))]
#[allow(clippy::too_many_arguments)]
fn mrc<'py>(
    py: Python<'py>,
    trace: &str,
    methods: Vec<String>,
    policies: Vec<String>,
    sizes: Option<&str>,
    rate: &str,
    shards_items: Option<usize>,
    shards_hot_keys: usize,
    sample_seed: u64,
    mode: Option<&str>,
    format: Option<&str>,
    block_size: &str,
    requests: usize,
    seed: u64,
    threads: Option<usize>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let fail = |f: Failure| to_pyerr(py, f);
    let spec = source_of(py, trace, format, mode, block_size, requests, seed)?;
    let threads = self::threads(threads);
    let rate = hearth_trace::sample::parse_rate(rate).map_err(|m| fail(arg(format!("rate: {m}"))))?;
    let sizes = match sizes {
        Some(s) => parse_sizes(s).map_err(|m| fail(arg(format!("sizes: {m}"))))?,
        None => mrc_grid(),
    };
    let mut lists = Vec::with_capacity(policies.len());
    for text in &policies {
        lists.push(text.parse::<PolicyList>().map_err(|m| fail(m.into()))?);
    }
    let policies = PolicyList::concat(&lists);
    for m in &methods {
        if !["exact", "shards", "mini", "full"].contains(&m.as_str()) {
            return Err(fail(arg(format!("unknown method {m:?} (known: exact, shards, mini, full)"))));
        }
    }
    let simulates = methods.iter().any(|m| m == "mini" || m == "full");
    let totals = sizes.iter().any(|s| matches!(s, CacheSize::Footprint(_)));
    let next_access = simulates && policies.iter().any(PolicySpec::is_offline);
    // The warnings `hearth mrc` prints, raised as Python warnings once the GIL is back.
    let mut warnings = Vec::new();
    let curves = interruptible(py, cancel_flag(&spec), || -> Result<Vec<Curve>, Failure> {
        let mut trace = Streamed::open(&spec, Needs { totals, next_access }, &())?;
        let cache_bytes = sizes
            .iter()
            .map(|s| s.resolve(trace.footprint_bytes(), trace.block_size()))
            .collect::<Result<Vec<u64>, _>>()?;
        let jobs: Vec<Job> = policies
            .iter()
            .flat_map(|p| cache_bytes.iter().map(|&c| Job { policy: p.clone(), cache_bytes: c }))
            .collect();
        let mut curves = Vec::new();
        for method in &methods {
            let started = Instant::now();
            let sampled = method == "shards" || method == "mini";
            trace.set_renaming(if sampled { KeyRenaming::for_seed(sample_seed) } else { KeyRenaming::IDENTITY });
            let (r, results) = match method.as_str() {
                "exact" => (1.0, exact_pass(&trace, &cache_bytes, &|_| {})?),
                "shards" => {
                    let m = shards_items.map_or(ShardsMode::FixedRate(rate), ShardsMode::FixedSize);
                    let shards = shards_pass(&trace, m, shards_hot_keys, &cache_bytes, &|_| {})?;
                    if shards.sampled_keys() < TRUSTED_SAMPLE_KEYS {
                        warnings.push(small_sample_warning(
                            shards.sampled_keys(),
                            shards_items.is_none() && shards_hot_keys == 0,
                        ));
                    }
                    (shards.rate(), shards.results())
                }
                "mini" => (rate, hearth_sim::minisim::run_miniature(&trace, &jobs, rate, threads, &|_| {})?),
                _ => (1.0, run_streaming(trace.accesses()?, &jobs, Counting::default(), threads, &|_| {})?),
            };
            let seconds = started.elapsed().as_secs_f64();
            if results.first().is_some_and(|r| r.requests == 0) {
                return Err(SourceError::NoRequests(trace.trace().clone()).into());
            }
            for points in results.chunks(cache_bytes.len()) {
                curves.push((method.clone(), r, seconds, points.to_vec()));
            }
        }
        Ok(curves)
    })?
    .map_err(fail)?;
    for message in warnings {
        let message = std::ffi::CString::new(message).expect("no NUL in the message");
        // Level 2: the warning points at the caller of `hearth.mrc`, not at the package.
        PyErr::warn(py, &py.get_type::<PyUserWarning>(), &message, 2)?;
    }
    let mut rows = Vec::new();
    for (method, rate, seconds, points) in curves {
        for p in &points {
            let d = row(py, trace, p)?;
            d.set_item("method", &method)?;
            d.set_item("rate", rate)?;
            d.set_item("seconds", seconds)?;
            rows.push(d);
        }
    }
    Ok(rows)
}

/// `hearth mrc`'s warning about a SHARDS sample too small to trust, in the
/// package's argument names.
fn small_sample_warning(sampled_keys: usize, unstratified: bool) -> String {
    let stratify = if unstratified { format!(", or stratify it (shards_hot_keys={HOT_KEYS})") } else { String::new() };
    format!(
        "the SHARDS sample holds {sampled_keys} distinct keys, fewer than the {TRUSTED_SAMPLE_KEYS} its curve is \
         trusted with; raise rate (or shards_items){stratify}"
    )
}

/// The `hearth analyze --json` report of a trace, as a JSON string.
#[pyfunction]
#[pyo3(signature = (trace, *, mode=None, format=None, block_size="4KiB", requests=1_000_000, seed=42))]
fn analyze(
    py: Python<'_>,
    trace: &str,
    mode: Option<&str>,
    format: Option<&str>,
    block_size: &str,
    requests: usize,
    seed: u64,
) -> PyResult<String> {
    let spec = source_of(py, trace, format, mode, block_size, requests, seed)?;
    interruptible(py, cancel_flag(&spec), || -> Result<String, Failure> {
        let (reader, mode) = spec.open()?;
        let report = hearth_analyze::analyze(reader, mode)?;
        serde_json::to_string(&report).map_err(|e| arg(e.to_string()))
    })?
    .map_err(|f| to_pyerr(py, f))
}

struct CacheState {
    policy: Box<dyn Policy>,
    evicted: Vec<Key>,
    vtime: u64,
    requests: u64,
    hits: u64,
    bytes: u64,
    hit_bytes: u64,
}

/// A cache driven one request at a time from Python.
///
/// Cache(policy, size): `policy` is a spec string ("lru", "mq:m=8") or a
/// policy written in Python: a class (called with the capacity in bytes) or
/// an instance, or a factory called with the capacity, whose objects have
/// methods hit(key, size), miss(key, size) and
/// evict(key, size) -> key (see hearth.Policy). `size` is bytes (an int) or
/// a byte size string ("64MiB").
///
/// A Cache belongs to the thread that made it.
#[pyclass(module = "hearth._native", unsendable)]
struct Cache {
    state: CacheState,
    error: ErrorSlot,
}

impl Cache {
    fn take_error(&self) -> PyResult<()> {
        match self.error.lock().unwrap().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[pymethods]
impl Cache {
    #[new]
    fn new(py: Python<'_>, policy: &Bound<'_, PyAny>, size: &Bound<'_, PyAny>) -> PyResult<Cache> {
        let capacity: u64 = match size.cast::<PyString>() {
            Ok(s) => hearth_core::parse_bytes(s.to_str()?).map_err(|m| to_pyerr(py, arg(format!("size: {m}"))))?,
            Err(_) => size.extract()?,
        };
        if capacity == 0 {
            return Err(to_pyerr(py, arg("size: a cache holds at least one byte")));
        }
        let error: ErrorSlot = Arc::new(Mutex::new(None));
        let policy: Box<dyn Policy> = if let Ok(spec) = policy.cast::<PyString>() {
            let spec: PolicySpec =
                spec.to_str()?.parse().map_err(|m: hearth_policy::SpecError| to_pyerr(py, m.into()))?;
            spec.build(capacity)
        } else if policy.is_instance_of::<PyType>() || (policy.is_callable() && !policy.hasattr("hit")?) {
            let obj = policy.call1((capacity,))?;
            Box::new(PyPolicy::new(py, obj.unbind(), capacity, error.clone())?)
        } else {
            Box::new(PyPolicy::new(py, policy.clone().unbind(), capacity, error.clone())?)
        };
        let state = CacheState { policy, evicted: Vec::new(), vtime: 0, requests: 0, hits: 0, bytes: 0, hit_bytes: 0 };
        Ok(Cache { state, error })
    }

    /// Requests `key` of `size` bytes: a hit returns True; a miss admits the
    /// key (unless larger than the cache), evicting as the policy chooses,
    /// and returns False. `next_access` (the logical time of the key's next
    /// request) matters only to OPT.
    #[pyo3(signature = (key, size=1, next_access=None))]
    fn access(&mut self, key: u64, size: u32, next_access: Option<u64>) -> PyResult<bool> {
        let hit = {
            let s = &mut self.state;
            let a =
                Access { key, size, vtime: s.vtime, next_access: next_access.unwrap_or(NEVER), op: Op::Read, ctx: 0 };
            s.vtime += 1;
            let CacheState { policy, evicted, .. } = &mut *s;
            evicted.clear();
            let hit = policy.access(&a, evicted);
            s.requests += 1;
            s.bytes += u64::from(size);
            if hit {
                s.hits += 1;
                s.hit_bytes += u64::from(size);
            }
            hit
        };
        self.take_error()?;
        Ok(hit)
    }

    /// Drops `key` if resident; returns whether it was.
    fn remove(&mut self, key: u64) -> PyResult<bool> {
        let was = self.state.policy.remove(key);
        self.take_error()?;
        Ok(was)
    }

    /// Keys evicted by the last access().
    #[getter]
    fn last_evicted(&self) -> Vec<u64> {
        self.state.evicted.clone()
    }

    /// The policy's report name ("LRU", or the plugin's name).
    #[getter]
    fn name(&self) -> String {
        self.state.policy.name()
    }

    /// Capacity in bytes.
    #[getter]
    fn capacity(&self) -> u64 {
        self.state.policy.capacity()
    }

    /// Bytes held now.
    #[getter]
    fn occupancy(&self) -> u64 {
        self.state.policy.occupancy()
    }

    /// Requests so far.
    #[getter]
    fn requests(&self) -> u64 {
        self.state.requests
    }

    /// Hits so far.
    #[getter]
    fn hits(&self) -> u64 {
        self.state.hits
    }

    /// Misses so far.
    #[getter]
    fn misses(&self) -> u64 {
        self.state.requests - self.state.hits
    }

    /// Bytes requested so far.
    #[getter]
    fn bytes(&self) -> u64 {
        self.state.bytes
    }

    /// Bytes of hits so far.
    #[getter]
    fn hit_bytes(&self) -> u64 {
        self.state.hit_bytes
    }

    fn __len__(&self) -> usize {
        self.state.policy.len()
    }

    fn __contains__(&self, key: u64) -> bool {
        self.state.policy.contains(key)
    }

    fn __repr__(&self) -> String {
        let s = &self.state;
        format!(
            "Cache({}, {} bytes: {} items, {} requests, {} hits)",
            s.policy.name(),
            s.policy.capacity(),
            s.policy.len(),
            s.requests,
            s.hits
        )
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // `hearth mrc --shards-hot-keys`'s default, which hearth.mrc takes as its own.
    m.add("SHARDS_HOT_KEYS", HOT_KEYS)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(policy_list, m)?)?;
    m.add_function(wrap_pyfunction!(cache_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(object_mode, m)?)?;
    m.add_function(wrap_pyfunction!(offline_policy, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_file, m)?)?;
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(mrc, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_class::<Cache>()?;
    Ok(())
}

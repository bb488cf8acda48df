"""Sweeps: traces x policies x sizes, split into (trace, policy, sizes) tasks
and run on a local thread pool or as Ray tasks."""

from __future__ import annotations

import os
import re
import secrets
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ._api import PolicyLike, SizesLike, TraceLike, _policies, _sizes, _traces, sim

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["sweep", "Task", "tasks", "memory_hint"]

#: One unit of work: (trace index, policy index, trace, policy, sizes).
Task = Tuple[int, int, str, Any, str]


def tasks(
    traces: Union[TraceLike, Sequence[TraceLike]],
    policies: Union[PolicyLike, Sequence[PolicyLike]],
    sizes: SizesLike,
) -> List[Task]:
    """The sweep's tasks: one per (trace, policy), each with every size.

    A spec string naming several policies (``"lru,arc"``) is split; ``"all"``
    is every registered policy.
    """
    from . import _native

    pols: List[Any] = []
    for p in _policies(policies):
        if isinstance(p, str):
            # The command line's reading: comma lists, parameters, "all".
            pols.extend(_native.policy_list(p))
        else:
            pols.append(p)
    size_spec = _sizes(sizes)
    return [(ti, pi, t, p, size_spec) for ti, t in enumerate(_traces(traces)) for pi, p in enumerate(pols)]


# The memory model of one task (see memory_hint). Measured with one-policy,
# one-thread hearth.sim runs on synth:uniform:1000000 (peak RSS less that of a
# 1000-key run): 73 to 150 bytes per resident key across the online policies,
# 170 per key of the trace for OPT and BeladySize at any size, and 16 per key
# for the first pass's key map.
#: A Ray worker with Python, pandas and hearth loaded (115 MiB measured outside
#: Ray; Ray's own share not measured), plus the stream's chunks.
BASE_BYTES = 256 << 20
#: Policy metadata per key a policy tracks (the largest measured).
KEY_BYTES = 170
#: Keys tracked per resident key, at most: MQ also remembers 4x the cache's
#: entries (the longest history of the registered policies).
TRACKED_PER_RESIDENT = 5
#: Key map of the first pass (sizes or warm-up given as shares), per key.
SCAN_KEY_BYTES = 16
#: Stored bytes per trace record: one new key per record of oracleGeneral's 24 bytes...
RECORD_BYTES = 24
#: ...and a gzip or zstd trace as this many times its stored bytes.
COMPRESSION = 4

_SYNTH_KEYS = re.compile(r"^synth:(?:zipf|uniform|loop):(\d+)")


def _trace_bytes(trace: str) -> Optional[int]:
    """The trace's stored size from the driver, without reading it: a stat,
    or one metadata request for an fsspec URL. None when the driver cannot see it."""
    try:
        from ._api import _URL

        if _URL.match(trace):
            import fsspec

            fs, path = fsspec.core.url_to_fs(trace)
            return int(fs.size(path))
        return os.path.getsize(trace)
    except Exception:  # only a hint: the task reports a trace it cannot read
        return None


def _keys(trace: str, options: Dict[str, Any]) -> Optional[int]:
    """An estimate of the trace's distinct keys: its records, from its size."""
    if trace.startswith("synth:"):
        requests = int(options.get("requests", 1_000_000))
        m = _SYNTH_KEYS.match(trace)
        return min(requests, int(m.group(1))) if m else requests
    stored = _trace_bytes(trace)
    if stored is None:
        return None
    compressed = trace.lower().rsplit("?", 1)[0].endswith((".gz", ".zst"))
    return stored * (COMPRESSION if compressed else 1) // RECORD_BYTES


def memory_hint(task: Task, options: Optional[Dict[str, Any]] = None) -> int:
    """The memory, in bytes, that one sweep task is expected to need at most:
    what ``engine="ray"`` reserves for it (Ray's ``memory`` resource).

    A task streams its trace (the chunks are in the base), so it holds the
    policy's metadata for every size at once, plus the first pass's key map
    when sizes or the warm-up are shares::

        keys      = records in the trace = stored bytes / 24
                    (x 4 for .gz/.zst; a synth: workload's block count or requests)
        resident  = keys x share        for a share of the footprint
                    bytes / block_size  for a byte size in block mode (blocks for a block count)
                    keys                for a byte size in object mode (object sizes unknown)
        tracked   = min(keys, 5 x resident)   (ghosts and history: MQ keeps 4x the cache's)
                    keys for an offline policy (OPT, BeladySize)
        memory    = 256 MiB + 170 B x sum of tracked over the sizes
                    + 16 B x keys if a first pass runs

    The trace's size comes from the driver without reading it (a stat, or one
    metadata request for a URL); a trace the driver cannot see gets the base
    alone. It is an estimate: a block trace whose requests span many blocks,
    or a trace that compresses better than 4x, has more keys than it assumes.
    ``sweep(..., memory=...)`` overrides it.
    """
    from . import _native

    options = options or {}
    _, _, trace, policy, size_spec = task
    keys = _keys(trace, options)
    if not keys:
        return BASE_BYTES
    object_mode = _native.object_mode(trace, options.get("format"), options.get("mode"))
    block_size = _parse_bytes(options.get("block_size", "4KiB"))
    offline = isinstance(policy, str) and _native.offline_policy(policy)
    sizes = _native.cache_sizes(size_spec)
    tracked = 0
    for kind, value in sizes:
        if kind == "share":
            resident = keys * value
        elif kind in ("blocks", "objects"):
            resident = value
        else:
            resident = keys if object_mode else value / block_size
        tracked += keys if offline else min(keys, TRACKED_PER_RESIDENT * resident)
    first_pass = any(kind == "share" for kind, _ in sizes) or str(options.get("warmup", "")).endswith("%")
    return int(BASE_BYTES + KEY_BYTES * tracked + (SCAN_KEY_BYTES * keys if first_pass else 0))


def _parse_bytes(size: Union[int, str]) -> int:
    from . import _native

    return int(_native.cache_sizes(str(size))[0][1])


def _run_task(task: Task, options: Dict[str, Any]) -> List[dict]:
    """Runs one task on one core; returns plain rows (no pandas objects cross processes)."""
    _, _, trace, policy, size_spec = task
    df = sim(trace, [policy], size_spec, threads=1, **options)
    return df.to_dict("records")


def _progress(total: int, enabled: bool, desc: str) -> Any:
    if enabled:
        try:
            from tqdm.auto import tqdm

            return tqdm(total=total, desc=desc, unit="task")
        except ImportError:
            pass
    return None


def _local(todo: List[Task], options: Dict[str, Any], workers: Optional[int], bar: Any) -> Iterator[Tuple[Task, List[dict]]]:
    # Threads suffice: the native simulation releases the GIL.
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        futures = {pool.submit(_run_task, t, options): t for t in todo}
        for f in as_completed(futures):
            yield futures[f], f.result()


#: What ``sweep(memory=...)`` takes: bytes for every task, or a function of the task.
MemoryLike = Union[int, Callable[[Task], int], None]


def _largest_node_memory(ray: Any) -> Optional[int]:
    sizes = [n["Resources"].get("memory", 0) for n in ray.nodes() if n.get("Alive")]
    return int(max(sizes)) if sizes else None


def _ray(
    todo: List[Task],
    options: Dict[str, Any],
    address: Optional[str],
    max_retries: int,
    memory: MemoryLike,
    ray_init: Optional[Dict[str, Any]],
) -> Iterator[Tuple[Task, List[dict]]]:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("engine='ray' needs Ray: pip install 'ray>=2.9'") from e
    started_here = not ray.is_initialized()
    with _own_token(started_here and address is None):
        if started_here:
            ray.init(address=address, log_to_driver=False, **(ray_init or {}))
        try:
            yield from _ray_tasks(ray, todo, options, max_retries, memory)
        finally:
            if started_here:
                ray.shutdown()


_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


@contextmanager
def _own_token(private: bool) -> Iterator[None]:
    """For a private Ray, a token of this session's own in the environment.

    Ray (2.60) starts a private cluster with token authentication and saves
    a new token to ~/.ray/auth_token; the user's later Ray clients find it
    and send it, and clusters started without it refuse them
    (InvalidAuthToken). A token in RAY_AUTH_TOKEN keeps the
    authentication and writes no file. Nothing changes when the user has
    chosen (one of the variables set, or a token file already there); the
    variables are put back afterwards.
    """
    chosen = any(v in os.environ for v in _AUTH_VARS) or os.path.exists(
        os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
    )
    if not private or chosen:
        yield
        return
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    try:
        yield
    finally:
        for v in _AUTH_VARS:  # ray.init also sets RAY_AUTH_MODE=token
            os.environ.pop(v, None)


def _ray_tasks(
    ray: Any, todo: List[Task], options: Dict[str, Any], max_retries: int, memory: MemoryLike
) -> Iterator[Tuple[Task, List[dict]]]:
    remote = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(_run_task)
    # The model's estimate is held to the largest node's memory: a task that
    # fits no node would wait forever, where this one runs alone.
    cap = _largest_node_memory(ray) if memory is None else None
    opts = ray.put(options)
    pending = {}
    for t in todo:
        if memory is None:
            need = memory_hint(t, options)
            need = min(need, cap) if cap else need
        else:
            need = memory(t) if callable(memory) else memory
        run = remote.options(memory=int(need)) if need > 0 else remote
        pending[run.remote(t, opts)] = t
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            yield pending.pop(ref), ray.get(ref)


def sweep(
    traces: Union[TraceLike, Sequence[TraceLike], None] = None,
    policies: Union[PolicyLike, Sequence[PolicyLike], None] = None,
    sizes: Optional[SizesLike] = None,
    *,
    config: Union[str, "os.PathLike[str]", None] = None,
    engine: str = "local",
    address: Optional[str] = None,
    workers: Optional[int] = None,
    max_retries: int = 3,
    memory: MemoryLike = None,
    progress: bool = True,
    output: Union[str, "os.PathLike[str]", None] = None,
    ray_init: Optional[Dict[str, Any]] = None,
    **sim_options: Any,
) -> "pd.DataFrame":
    """Simulate every trace x policy x size, in parallel, into one DataFrame.

    The sweep is split into one task per (trace, policy) with all the sizes;
    each task is one :func:`hearth.sim` call on one core. Traces are opened
    by whoever runs the task, so with Ray every node must see the same path
    (a shared file system) or reach the same fsspec URL (``https://...``,
    ``s3://...``, with the protocol's settings, e.g. ``AWS_*`` variables
    through ``ray_init={"runtime_env": {"env_vars": ...}}``; each task
    downloads its trace to a local temporary file) -- nothing is copied
    through the driver, which only asks the traces' sizes (see
    :func:`memory_hint`).

    Args:
        traces: trace paths, fsspec URLs (or ``synth:`` workloads).
        policies: spec strings and/or Python policy classes (see :func:`hearth.sim`).
        sizes: as for :func:`hearth.sim`.
        config: a sweep file, as ``hearth sweep FILE`` reads it (TOML:
            ``traces``, ``policies``, ``sizes``, and optionally ``mode``,
            ``warmup``, ``format``, ``block_size``, ``requests``, ``seed``,
            ``output``, ``workers``; paths relative to the file). Arguments
            given here take precedence over the file's values.
        engine: ``"local"`` (a thread pool of ``workers`` threads, default one
            per core; the simulation releases the GIL) or ``"ray"`` (Ray
            tasks with ``num_cpus=1``).
        address: the Ray cluster to join (``"auto"``, ``"HOST:PORT"``);
            ``None`` starts a private local Ray. Ignored when Ray is already
            initialised in this process. A Ray session started here is shut
            down at the end.
        max_retries: Ray re-runs a task whose worker process or node died
            this many times.
        memory: Ray's memory reservation per task, in bytes (Ray schedules
            by it; it does not limit the task). ``None``: each task's
            :func:`memory_hint`, at most the largest node's memory; an int:
            that for every task (``0``: none); a function: called with each
            :data:`Task`.
        progress: show a tqdm bar (when tqdm is installed).
        output: also write the result to this ``.parquet``, ``.csv`` or
            ``.json`` file (``hearth sweep``'s columns for the last two).
        ray_init: extra keyword arguments for ``ray.init``.
        **sim_options: passed to every :func:`hearth.sim` call (``mode``,
            ``warmup``, ``format``, ``block_size``, ``interval``, ...).

    Returns:
        The rows of ``hearth.sim(traces, policies, sizes)`` -- the same
        numbers, in the same order (trace, then size, then policy) -- whatever
        the engine.
    """
    if config is not None:
        from . import _native

        conf = _native.sweep_file(os.fspath(config))
        traces = conf["traces"] if traces is None else traces
        policies = conf["policies"] if policies is None else policies
        sizes = conf["sizes"] if sizes is None else sizes
        output = conf["output"] if output is None else output
        workers = conf["workers"] if workers is None else workers
        for key in ("mode", "warmup", "format", "block_size", "requests", "seed"):
            if conf[key] is not None:
                sim_options.setdefault(key, conf[key])
    if traces is None or policies is None or sizes is None:
        raise TypeError("sweep needs traces, policies and sizes, or a config file that gives them")
    if "threads" in sim_options:
        raise TypeError("sweep runs each task on one thread; use workers= for the local pool")
    todo = tasks(traces, policies, sizes)
    if output is not None:
        _writer(output)  # fail early on an unknown extension
    bar = _progress(len(todo), progress, f"hearth sweep ({engine})")
    if engine == "local":
        runs = _local(todo, sim_options, workers, bar)
    elif engine == "ray":
        runs = _ray(todo, sim_options, address, max_retries, memory, ray_init)
    else:
        raise ValueError(f"engine must be 'local' or 'ray', not {engine!r}")
    results: Dict[Tuple[int, int], List[dict]] = {}
    try:
        for task, rows in runs:
            results[(task[0], task[1])] = rows
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    df = _assemble(todo, results)
    if output is not None:
        _writer(output)(df)
    return df


def _assemble(todo: List[Task], results: Dict[Tuple[int, int], List[dict]]) -> "pd.DataFrame":
    """Orders rows as ``hearth sim --json`` does for several traces: trace, size, policy."""
    import pandas as pd

    from ._api import SIM_COLUMNS

    n_traces = max((t[0] for t in todo), default=-1) + 1
    n_policies = max((t[1] for t in todo), default=-1) + 1
    rows: List[dict] = []
    for ti in range(n_traces):
        n_sizes = len(results[(ti, 0)])
        for si in range(n_sizes):
            for pi in range(n_policies):
                rows.append(results[(ti, pi)][si])
    columns = list(SIM_COLUMNS)
    columns += [c for c in (rows[0] if rows else {}) if c not in columns]
    df = pd.DataFrame(rows, columns=columns)
    for c in ("cache_bytes", "requests", "hits", "bytes", "hit_bytes"):
        df[c] = df[c].astype("int64")
    return df


def _writer(path: Union[str, "os.PathLike[str]"]) -> Any:
    p = os.fspath(path)
    if p.endswith(".parquet"):
        return lambda df: df.to_parquet(p, index=False)
    if p.endswith(".csv"):
        return lambda df: df.to_csv(p, index=False)
    if p.endswith(".json"):
        return lambda df: df.to_json(p, orient="records", indent=2)
    raise ValueError(f"output must end in .parquet, .csv or .json: {p!r}")

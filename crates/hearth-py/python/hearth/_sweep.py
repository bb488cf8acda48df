"""Sweeps: traces x policies x sizes, split into (trace, policy, sizes) tasks
and run on a local thread pool or as Ray tasks."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ._api import PolicyLike, SizesLike, TraceLike, _policies, _sizes, _traces, sim

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["sweep", "Task", "tasks"]

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


def _ray(
    todo: List[Task],
    options: Dict[str, Any],
    address: Optional[str],
    max_retries: int,
    memory: Optional[int],
    ray_init: Optional[Dict[str, Any]],
) -> Iterator[Tuple[Task, List[dict]]]:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("engine='ray' needs Ray: pip install 'ray>=2.9'") from e
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, log_to_driver=False, **(ray_init or {}))
    try:
        resources: Dict[str, Any] = {"num_cpus": 1, "max_retries": max_retries, "retry_exceptions": False}
        if memory:
            resources["memory"] = memory
        remote = ray.remote(**resources)(_run_task)
        opts = ray.put(options)
        pending = {remote.remote(t, opts): t for t in todo}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                yield pending.pop(ref), ray.get(ref)
    finally:
        if started_here:
            ray.shutdown()


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
    memory: Optional[int] = None,
    progress: bool = True,
    output: Union[str, "os.PathLike[str]", None] = None,
    ray_init: Optional[Dict[str, Any]] = None,
    **sim_options: Any,
) -> "pd.DataFrame":
    """Simulate every trace x policy x size, in parallel, into one DataFrame.

    The sweep is split into one task per (trace, policy) with all the sizes;
    each task is one :func:`hearth.sim` call on one core. Traces are opened
    by whoever runs the task, so with Ray every node must see the same path
    (a shared file system) or reach the same fsspec URL (``s3://...``, each
    task copying its trace to a local temporary file) -- nothing is copied
    through the driver.

    Args:
        traces: trace paths (or ``synth:`` workloads).
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
        memory: Ray's memory reservation per task, in bytes (scheduling only).
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

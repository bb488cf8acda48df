"""Simulation calls: thin, typed wrappers over ``hearth._native`` that return
pandas DataFrames."""

from __future__ import annotations

import os
import json
import re
import shutil
import tempfile
from urllib.parse import urlsplit
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

from . import _native

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["policies", "sim", "mrc", "analyze", "TraceLike", "PolicyLike", "SizesLike", "SIM_COLUMNS", "RATIO_COLUMNS"]

#: A trace: a path (any format ``hearth sim`` reads, ``.gz``/``.zst`` too), an
#: fsspec URL (``s3://``, ``https://``, ``file://``...; fsspec must be
#: installed) or a synthetic workload such as ``"synth:zipf:100000:0.9"``.
TraceLike = Union[str, "os.PathLike[str]"]
#: A policy: a spec string (``"lru"``, ``"mq:m=8,lifetime=5000"``, ``"all"``)
#: or a policy written in Python: a class (or factory) called with the
#: capacity in bytes, whose instances have ``hit``, ``miss`` and ``evict``
#: (see :class:`hearth.Policy`).
PolicyLike = Union[str, Callable[[int], Any]]
#: Cache sizes: a string as on the command line (``"1%,5%,64MiB,5000blocks"``,
#: ``"128MiB..1GiB/128MiB"``), an int (bytes), a float in (0, 1] (a share of
#: the footprint), or a sequence of these.
SizesLike = Union[str, int, float, Sequence[Union[str, int, float]]]

#: The columns of ``hearth sim --json`` rows, in order.
SIM_COLUMNS = ["trace", "policy", "cache_bytes", "requests", "hits", "bytes", "hit_bytes"]
# The ratios as fractions, named as in every command's JSON and CSV (docs/GUIDE.md, "Flag conventions").
RATIO_COLUMNS = ["hit_ratio", "miss_ratio", "byte_hit_ratio", "byte_miss_ratio"]


def _add_ratios(df: "pd.DataFrame") -> None:
    df["hit_ratio"] = (df["hits"] / df["requests"]).where(df["requests"] > 0, 0.0)
    df["miss_ratio"] = 1.0 - df["hit_ratio"]
    df["byte_hit_ratio"] = (df["hit_bytes"] / df["bytes"]).where(df["bytes"] > 0, 0.0)
    df["byte_miss_ratio"] = 1.0 - df["byte_hit_ratio"]


def _sizes(sizes: SizesLike) -> str:
    def one(s: Union[str, int, float]) -> str:
        if isinstance(s, bool):
            raise TypeError("a cache size is a string, an int (bytes) or a float share, not a bool")
        if isinstance(s, str):
            return s
        if isinstance(s, int):
            return str(s)
        if isinstance(s, float):
            if not 0.0 < s <= 1.0:
                raise _errors_config(f"sizes: a float size is a share of the footprint in (0, 1], not {s!r}")
            return format(s * 100.0, ".15g") + "%"
        raise TypeError(f"a cache size is a string, an int (bytes) or a float share, not {type(s).__name__}")

    if isinstance(sizes, (str, int, float)):
        return one(sizes)
    return ",".join(one(s) for s in sizes)


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@contextmanager
def _fetched(trace: str) -> Iterator[str]:
    """A local path for ``trace``: the trace itself, the path of a ``file://``
    URL, or for any other fsspec URL a temporary copy named like the original
    (so that its format is told from the name; an HTTP query string is
    dropped), downloaded in pieces and removed afterwards. The simulator reads
    a trace more than once (a first pass, then the replay), hence a file."""
    if not _URL.match(trace):
        yield trace
        return
    try:
        import fsspec
    except ImportError as e:
        raise ImportError(f"reading {trace} needs fsspec: pip install fsspec") from e
    fs, path = fsspec.core.url_to_fs(trace)
    if "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
        yield path
        return
    tmp = tempfile.mkdtemp(prefix="hearth-")
    try:
        name = os.path.basename(urlsplit(path).path.rstrip("/")) or "trace"
        local = os.path.join(tmp, name)
        # get_file, not open(): fsspec's HTTP files read by range requests, which
        # servers that do not support them (Python's http.server) refuse past the
        # first block; get_file streams one plain GET.
        fs.get_file(path, local)
        yield local
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _local_traces(traces: List[str]) -> Iterator[List[str]]:
    """Local paths for ``traces``; errors name the original URL, not the copy."""
    from ._errors import HearthError

    with ExitStack() as stack:
        local = [stack.enter_context(_fetched(t)) for t in traces]
        try:
            yield local
        except HearthError as e:
            for path, name in zip(local, traces):
                if path != name:
                    e.args = tuple(a.replace(path, name) if isinstance(a, str) else a for a in e.args)
                    for attr in ("file", "filename"):
                        if getattr(e, attr, None) == path:
                            setattr(e, attr, name)
            raise


def _errors_config(msg: str) -> Exception:
    from ._errors import ConfigError

    return ConfigError(msg)


def _traces(trace: Union[TraceLike, Sequence[TraceLike]]) -> List[str]:
    if isinstance(trace, (str, os.PathLike)):
        return [os.fspath(trace)]
    return [os.fspath(t) for t in trace]


def _policies(policies: Union[PolicyLike, Sequence[PolicyLike]]) -> List[Any]:
    if isinstance(policies, str) or callable(policies):
        return [policies]
    return list(policies)


def _warmup(warmup: Union[int, str, None]) -> Optional[str]:
    if warmup is None:
        return None
    if isinstance(warmup, float):
        raise _errors_config("warmup: give a count of requests (int) or a share like '10%'")
    return str(warmup)


def _frame(rows: List[dict], columns: List[str]) -> "pd.DataFrame":
    import pandas as pd

    extra = [c for c in (rows[0] if rows else {}) if c not in columns]
    df = pd.DataFrame(rows, columns=columns + extra)
    for c in ("cache_bytes", "requests", "hits", "bytes", "hit_bytes"):
        if c in df:
            df[c] = df[c].astype("int64")
    return df


def policies() -> "pd.DataFrame":
    """The registered replacement policies, as ``hearth policies`` lists them.

    Returns a DataFrame with columns ``name`` (the spec name, e.g. ``"arc"``)
    and ``description`` (parameters and their defaults).
    """
    import pandas as pd

    return pd.DataFrame(_native.policies(), columns=["name", "description"])


def sim(
    trace: Union[TraceLike, Sequence[TraceLike]],
    policies: Union[PolicyLike, Sequence[PolicyLike]] = "classic,modern",
    sizes: SizesLike = "1%,5%,10%,25%",
    *,
    mode: Optional[str] = None,
    warmup: Union[int, str, None] = None,
    interval: Optional[int] = None,
    format: Optional[str] = None,
    block_size: Union[int, str] = "4KiB",
    requests: int = 1_000_000,
    seed: int = 42,
    threads: Optional[int] = None,
) -> "pd.DataFrame":
    """Replay one or more traces against policies at cache sizes (``hearth sim``).

    The trace is streamed through the same Rust code as ``hearth sim``: it is
    decoded once per pass in chunks and never held whole in memory (a first
    pass runs only for sizes or warm-up given as shares, and for OPT on traces
    without next-access times). The GIL is released while built-in policies
    run; policies written in Python run on the calling thread. Ctrl-C
    (KeyboardInterrupt) ends the call.

    Args:
        trace: a trace path, an fsspec URL (copied to a local temporary
            file first, in pieces), a ``synth:`` workload, or a list of them.
        policies: spec strings (``"lru"``, ``"lru,arc"``, ``"mq:m=8"``,
            ``"all"``) and/or Python policy classes (see :class:`hearth.Policy`).
            The default, ``"classic,modern"``, is every policy but the
            ``learned`` ones, which train models during the run (minutes
            on the bundled trace).
        sizes: ``"1%,5%"`` (share of footprint), ``"64MiB"``, ``"5000blocks"``,
            ``"128MiB..1GiB/128MiB"``, ints (bytes), floats in (0, 1] (shares),
            or a list of these.
        mode: ``"block"`` (split requests into ``block_size`` blocks; the
            default for block traces) or ``"object"`` (one object per request,
            as libCacheSim; the default for oracleGeneral and text traces).
        warmup: requests replayed but not counted: a count or a share (``"10%"``).
        interval: also record the miss ratio of every N counted requests
            (column ``interval_miss_ratios``).
        format: the trace format when the file name does not tell
            (msr, blkparse, vscsi, spc, oracle, text, cpcsv).
        block_size: block size in block mode (bytes or ``"4KiB"``).
        requests, seed: length and seed of a ``synth:`` workload.
        threads: worker threads (default: one per core).

    Returns:
        A DataFrame with one row per (trace, size, policy), in the order of
        ``hearth sim --json`` (sizes outer, policies inner), whose columns are
        that command's fields -- ``trace``, ``policy``, ``cache_bytes``,
        ``requests``, ``hits``, ``bytes``, ``hit_bytes`` (and
        ``interval_miss_ratios`` with ``interval``) -- followed by
        ``hit_ratio``, ``miss_ratio``, ``byte_hit_ratio`` and ``byte_miss_ratio``.

    Raises:
        hearth.ConfigError: a bad policy, size, mode or warm-up (a ValueError).
        hearth.TraceError: a malformed trace (a ValueError), with the file and
            line or byte offset in its text, as on the command line.
        hearth.TraceIOError: a trace that cannot be opened or read (an OSError).
    """
    names = _traces(trace)
    with _local_traces(names) as local:
        rows = _native.sim(
            local,
            _policies(policies),
        _sizes(sizes),
            mode=mode,
            warmup=_warmup(warmup),
            interval=interval,
            format=format,
            block_size=str(block_size),
            requests=requests,
            seed=seed,
            threads=threads,
        )
        renamed = {p: n for p, n in zip(local, names) if p != n}
    df = _frame(rows, list(SIM_COLUMNS))
    if renamed:
        df["trace"] = df["trace"].map(lambda t: renamed.get(t, t))
    _add_ratios(df)
    return df


def mrc(
    trace: TraceLike,
    method: Union[str, Sequence[str]] = "exact",
    policies: Union[str, Sequence[str]] = "lru",
    sizes: Optional[SizesLike] = None,
    *,
    rate: Union[str, float] = "1%",
    shards_items: Optional[int] = None,
    shards_hot_keys: int = _native.SHARDS_HOT_KEYS,
    sample_seed: int = 0,
    mode: Optional[str] = None,
    format: Optional[str] = None,
    block_size: Union[int, str] = "4KiB",
    requests: int = 1_000_000,
    seed: int = 42,
    threads: Optional[int] = None,
) -> "pd.DataFrame":
    """Miss-ratio curves in one pass over the trace (``hearth mrc``).

    Methods: ``"exact"`` (LRU at every size from stack distances), ``"shards"``
    (LRU from a spatial sample at ``rate``, or of at most ``shards_items``
    items), ``"mini"`` (any policy on the sample with its cache scaled by the
    rate) and ``"full"`` (every policy at every size, the reference).

    Args:
        trace: a trace path or ``synth:`` workload.
        method: one method or a list (``"exact,shards"`` works too).
        policies: policy specs for ``mini`` and ``full`` (exact and shards are LRU).
        sizes: as for :func:`sim`; default 40 sizes from 0.1% to 100% of the
            footprint, evenly spaced on a log scale.
        rate: sampling rate for shards and mini: ``"1%"`` or ``0.01``.
        shards_items: fixed-size SHARDS: track at most this many items.
        shards_hot_keys: fixed-rate SHARDS tracks this many of the keys most
            requested in the first 2^20 requests exactly and samples the
            others (``hearth mrc --shards-hot-keys``; 128, the default, is
            the measured setting: about half SHARDS_adj's error at 1%, at
            1.8 to 2.3 times its time); 0 is the paper's SHARDS_adj.
        sample_seed: which draw of the sample shards and mini take (``hearth
            mrc --sample-seed``): keys are renamed by a bijection from it
            before hashing; 0 is the sample ``hearth trace sample`` writes.
            The spread of a curve over seeds is its sampling error.
        mode, format, block_size, requests, seed, threads: as for :func:`sim`.

    Returns:
        One row per point: ``method``, ``rate`` (1 for exact and full),
        ``seconds`` (the curve's time), then the ``sim`` columns
        (``trace``, ``policy``, ``cache_bytes``, ``requests``, ``hits``,
        ``bytes``, ``hit_bytes``, ``hit_ratio``, ``miss_ratio``,
        ``byte_hit_ratio``).
    """
    methods = [method] if isinstance(method, str) else list(method)
    methods = [m.strip() for ms in methods for m in ms.split(",") if m.strip()]
    # Each string is a policy list, parsed (split) on the Rust side as ``sim`` does.
    pols = [policies] if isinstance(policies, str) else list(policies)
    name = os.fspath(trace)
    with _local_traces([name]) as (local,):
        rows = _native.mrc(
            local,
            methods,
            pols,
            None if sizes is None else _sizes(sizes),
            rate=str(rate),
            shards_items=shards_items,
            shards_hot_keys=shards_hot_keys,
            sample_seed=sample_seed,
            mode=mode,
            format=format,
            block_size=str(block_size),
            requests=requests,
            seed=seed,
            threads=threads,
        )
    df = _frame(rows, ["method", "rate", "seconds"] + list(SIM_COLUMNS))
    df["trace"] = name
    _add_ratios(df)
    return df


def _histogram(counts: List[int]) -> "pd.DataFrame":
    import pandas as pd

    lows = [0] + [1 << (b - 1) for b in range(1, len(counts))]
    highs = [1] + [1 << b for b in range(1, len(counts))]
    total = sum(counts) or 1
    return pd.DataFrame(
        {"low": lows, "high": highs, "count": counts, "share": [c / total for c in counts]},
        columns=["low", "high", "count", "share"],
    )


def analyze(
    trace: TraceLike,
    *,
    mode: Optional[str] = None,
    format: Optional[str] = None,
    block_size: Union[int, str] = "4KiB",
    requests: int = 1_000_000,
    seed: int = 42,
    raw: bool = False,
) -> Dict[str, Any]:
    """Characterise a trace as a cache sees it (``hearth analyze``).

    The accesses are held in Rust memory (40 bytes each) for the distances,
    as by the command line.

    Args:
        trace: a trace path or ``synth:`` workload.
        mode, format, block_size, requests, seed: as for :func:`sim`.
        raw: return the ``hearth analyze --json`` report as it is.

    Returns:
        A dict with the report's counts (``requests``, ``reads``, ``writes``,
        ``others``, ``accesses``, ``unique_keys``, ``footprint_bytes``,
        ``cold_accesses``) and DataFrames: ``request_sizes`` (bytes),
        ``reuse_distance`` (distinct keys between two uses) and
        ``temporal_distance`` (requests between two uses), each with one row
        per log2 bucket ``[low, high)`` and its ``count`` and ``share``; and
        ``frequency_curve`` (``keys_pct``: the most accessed keys, as a share
        of all keys, ``accesses_pct``: the share of accesses they receive).
    """
    import pandas as pd

    with _local_traces([os.fspath(trace)]) as (local,):
        report = json.loads(
            _native.analyze(local, mode=mode, format=format, block_size=str(block_size), requests=requests, seed=seed)
        )
    if raw:
        return report
    out: Dict[str, Any] = {}
    for key, value in report.items():
        if isinstance(value, dict) and "counts" in value:
            out[key] = _histogram(value["counts"])
        elif key == "frequency_curve":
            out[key] = pd.DataFrame(value, columns=["keys_pct", "accesses_pct"])
        else:
            out[key] = value
    return out

"""Type stubs for the Rust extension ``hearth._native`` (use the wrappers in ``hearth``)."""

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

SHARDS_HOT_KEYS: int

def policies() -> List[Tuple[str, str]]:
    """The registered policies as (name, description) pairs."""

def cache_sizes(sizes: str) -> List[Tuple[str, float]]:
    """The sizes of a size list, ranges expanded: ("share", f), ("bytes", n) or ("blocks", n)."""

def object_mode(trace: str, format: Optional[str] = None, mode: Optional[str] = None) -> bool:
    """Whether ``sim`` replays ``trace`` in object mode (decided from the arguments and the name)."""

def offline_policy(spec: str) -> bool:
    """Whether a policy spec is offline (OPT, BeladySize); a bad spec raises ConfigError."""

def sim(
    traces: Sequence[str],
    policies: Sequence[Any],
    sizes: str,
    *,
    mode: Optional[str] = None,
    warmup: Optional[str] = None,
    interval: Optional[int] = None,
    format: Optional[str] = None,
    block_size: str = "4KiB",
    requests: int = 1000000,
    seed: int = 42,
    threads: Optional[int] = None,
) -> List[Dict[str, Any]]:
    """``hearth sim --json`` rows, one dict per (trace, size, policy)."""

def mrc(
    trace: str,
    methods: Sequence[str],
    policies: Sequence[str],
    sizes: Optional[str] = None,
    *,
    rate: str = "1%",
    shards_items: Optional[int] = None,
    shards_hot_keys: int = ...,
    sample_seed: int = 0,
    mode: Optional[str] = None,
    format: Optional[str] = None,
    block_size: str = "4KiB",
    requests: int = 1000000,
    seed: int = 42,
    threads: Optional[int] = None,
) -> List[Dict[str, Any]]:
    """One dict per curve point, with ``method``, ``rate`` and ``seconds``."""

def analyze(
    trace: str,
    *,
    mode: Optional[str] = None,
    format: Optional[str] = None,
    block_size: str = "4KiB",
    requests: int = 1000000,
    seed: int = 42,
) -> str:
    """The ``hearth analyze --json`` report, as a JSON string."""

class Cache:
    """A cache driven one request at a time from Python.

    ``policy`` is a spec string (``"lru"``, ``"mq:m=8"``) or a policy written in
    Python (a class or factory called with the capacity, or an instance; see
    ``hearth.Policy``). ``size`` is bytes or a byte-size string (``"64MiB"``).
    """

    def __init__(self, policy: Any, size: Union[int, str]) -> None: ...
    def access(self, key: int, size: int = 1, next_access: Optional[int] = None) -> bool:
        """Requests ``key`` of ``size`` bytes; True on a hit (a miss admits the key)."""
    def remove(self, key: int) -> bool:
        """Drops ``key`` if resident; returns whether it was."""
    @property
    def last_evicted(self) -> List[int]: ...
    @property
    def name(self) -> str: ...
    @property
    def capacity(self) -> int: ...
    @property
    def occupancy(self) -> int: ...
    @property
    def requests(self) -> int: ...
    @property
    def hits(self) -> int: ...
    @property
    def misses(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def hit_bytes(self) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: int) -> bool: ...

"""Replacement policies written in Python.

Hearth keeps the resident set and the byte count; a Python policy only
decides, as with libCacheSim's PluginCache. Use one with :class:`hearth.Cache`
or pass its class to :func:`hearth.sim` / :func:`hearth.sweep` next to
built-in policy names.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Optional

__all__ = ["Policy", "PluginPolicy", "PythonLRU"]


class Policy:
    """Base class for a replacement policy written in Python (subclassing is optional:
    any object with these methods works).

    Hearth calls, for every request of ``key`` (an int) of ``size`` bytes:

    * ``hit(key, size)`` when ``key`` is resident;
    * otherwise, if the object fits in the cache: ``evict(key, size)`` as many
      times as needed to make room -- it returns the resident key to evict
      and must forget it -- then ``miss(key, size)`` once ``key`` is admitted;
    * ``remove(key)`` when ``key`` is invalidated (``Cache.remove``).

    The class is constructed with the capacity in bytes: ``MyPolicy(capacity)``.
    Its report name is its ``name`` attribute, or the class name.
    """

    name: Optional[str] = None

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity

    def hit(self, key: int, size: int) -> None:
        """``key`` was requested and is resident."""

    def miss(self, key: int, size: int) -> None:
        """``key`` was not resident and has just been admitted."""

    def evict(self, key: int, size: int) -> int:
        """Choose a resident key to evict (to make room for ``key`` of ``size`` bytes), forget it, return it."""
        raise NotImplementedError

    def remove(self, key: int) -> None:
        """``key`` was dropped from the cache without being chosen by ``evict``."""


class PythonLRU(Policy):
    """LRU in a few lines of Python: an example plugin, and the reference the
    tests hold against the built-in ``lru``."""

    name = "PyLRU"

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.order: "OrderedDict[int, None]" = OrderedDict()

    def hit(self, key: int, size: int) -> None:
        self.order.move_to_end(key)

    def miss(self, key: int, size: int) -> None:
        self.order[key] = None

    def evict(self, key: int, size: int) -> int:
        victim, _ = self.order.popitem(last=False)
        return victim

    def remove(self, key: int) -> None:
        self.order.pop(key, None)


class PluginPolicy(Policy):
    """A policy made of hook functions, in the style of libCacheSim's PluginCache.

    ``init_hook(capacity)`` returns the policy's state; the other hooks get it
    first: ``hit_hook(state, key, size)``, ``miss_hook(state, key, size)``,
    ``eviction_hook(state, key, size) -> victim key``, ``remove_hook(state, key)``.
    Pass it where a policy class goes with :meth:`factory`::

        lru = hearth.PluginPolicy.factory(init, hit, miss, evict, name="MyLRU")
        hearth.sim(trace, ["lru", lru], sizes="1%,10%")
    """

    def __init__(
        self,
        capacity: int,
        init_hook: Callable[[int], Any],
        hit_hook: Callable[[Any, int, int], None],
        miss_hook: Callable[[Any, int, int], None],
        eviction_hook: Callable[[Any, int, int], int],
        remove_hook: Optional[Callable[[Any, int], None]] = None,
        name: str = "Plugin",
    ) -> None:
        super().__init__(capacity)
        self.name = name
        self.state = init_hook(capacity)
        self._hit, self._miss, self._evict, self._remove = hit_hook, miss_hook, eviction_hook, remove_hook

    def hit(self, key: int, size: int) -> None:
        self._hit(self.state, key, size)

    def miss(self, key: int, size: int) -> None:
        self._miss(self.state, key, size)

    def evict(self, key: int, size: int) -> int:
        return self._evict(self.state, key, size)

    def remove(self, key: int) -> None:
        if self._remove is not None:
            self._remove(self.state, key)

    @classmethod
    def factory(
        cls,
        init_hook: Callable[[int], Any],
        hit_hook: Callable[[Any, int, int], None],
        miss_hook: Callable[[Any, int, int], None],
        eviction_hook: Callable[[Any, int, int], int],
        remove_hook: Optional[Callable[[Any, int], None]] = None,
        name: str = "Plugin",
    ) -> "_Factory":
        """A picklable callable ``capacity -> PluginPolicy`` for :func:`hearth.sim` and sweeps."""
        return _Factory(cls, init_hook, hit_hook, miss_hook, eviction_hook, remove_hook, name)


class _Factory:
    def __init__(self, cls: type, *args: Any) -> None:
        self.cls, self.args = cls, args

    def __call__(self, capacity: int) -> PluginPolicy:
        return self.cls(capacity, *self.args)

    def __repr__(self) -> str:
        return f"PluginPolicy.factory(name={self.args[-1]!r})"

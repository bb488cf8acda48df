"""Policies written in Python: the same misses as the built-in ones, and errors that surface."""

from __future__ import annotations

import struct
from collections import OrderedDict

import pytest

import hearth

SIZES = ["0.1%", "1%", "5%", "64MiB"]


def test_python_lru_equals_builtin_lru_on_the_bundled_trace(oracle):
    df = hearth.sim(oracle, ["lru", hearth.PythonLRU], SIZES, mode="object")
    builtin, plugin = df[df.policy == "LRU"], df[df.policy == "PyLRU"]
    assert len(builtin) == len(plugin) == len(SIZES)
    for col in ("cache_bytes", "requests", "hits", "bytes", "hit_bytes"):
        assert builtin[col].tolist() == plugin[col].tolist(), col
    misses = (builtin["requests"] - builtin["hits"]).tolist()
    assert len(set(misses)) == len(SIZES)  # four different caches, each matched exactly


def test_hook_style_plugin_and_cache_driven_from_python(oracle):
    """libCacheSim-style hooks, driven one request at a time, against the built-in LRU."""

    def init(capacity):
        return OrderedDict()

    def hit(state, key, size):
        state.move_to_end(key)

    def miss(state, key, size):
        state[key] = size

    def evict(state, key, size):
        return state.popitem(last=False)[0]

    factory = hearth.PluginPolicy.factory(init, hit, miss, evict, name="HookLRU")
    rec = struct.Struct("<IQIq")
    data = oracle.read_bytes()[: rec.size * 30000]
    for size in (1 << 20, 16 << 20):
        ours, builtin = hearth.Cache(factory, size), hearth.Cache("lru", size)
        for off in range(0, len(data), rec.size):
            _, key, obj_size, _ = rec.unpack_from(data, off)
            assert ours.access(key, obj_size) == builtin.access(key, obj_size)
        assert (ours.misses, ours.occupancy, len(ours)) == (builtin.misses, builtin.occupancy, len(builtin))
        assert ours.name == "HookLRU" and builtin.name == "LRU"
    df = hearth.sim(oracle, ["lru", factory], "1%")
    assert df["hits"].nunique() == 1


def test_cache_basics():
    c = hearth.Cache("lru", "3")
    assert [c.access(k) for k in (1, 2, 1, 3, 4, 1)] == [False, False, True, False, False, True]
    assert (c.requests, c.hits, c.misses, c.capacity, len(c)) == (6, 2, 4, 3, 3)
    assert 1 in c and 2 not in c and c.last_evicted == []
    assert c.remove(1) and not c.remove(1)
    c.access(9, size=10)  # larger than the cache: never admitted
    assert 9 not in c
    with pytest.raises(hearth.ConfigError, match="unknown policy"):
        hearth.Cache("nope", 10)


def test_plugin_errors_become_python_exceptions(oracle):
    class Broken(hearth.Policy):
        def evict(self, key, size):
            return 123456789  # not resident

    with pytest.raises(ValueError, match="not in the cache"):
        hearth.sim(oracle, [Broken], "1MiB")

    class Raises(hearth.PythonLRU):
        def hit(self, key, size):
            raise RuntimeError("boom from Python")

    c = hearth.Cache(Raises, 10)
    c.access(1)
    with pytest.raises(RuntimeError, match="boom from Python"):
        c.access(1)
    with pytest.raises(RuntimeError, match="boom from Python"):
        hearth.sim(oracle, ["lru", Raises], "1MiB")

    with pytest.raises(ValueError, match="no method"):
        hearth.Cache(object(), 10)

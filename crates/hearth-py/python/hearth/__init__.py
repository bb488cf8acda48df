"""Hearth's storage-cache simulator from Python.

* :func:`policies` -- the registered replacement policies;
* :func:`sim` -- replay traces against policies at cache sizes, as
  ``hearth sim --json``, into a pandas DataFrame (streamed, GIL released);
* :func:`mrc` -- one-pass miss-ratio curves, as ``hearth mrc``;
* :func:`analyze` -- mix, sizes, reuse and temporal distances, skew, as ``hearth analyze``;
* :class:`Cache` -- a cache driven one request at a time;
* :class:`Policy` -- write a replacement policy in Python and simulate it
  (also :class:`PluginPolicy`, libCacheSim-style hooks);
* :func:`sweep` -- traces x policies x sizes on a thread pool or a Ray cluster
  (:func:`memory_hint`: what a Ray task reserves).

Errors are :class:`ConfigError` / :class:`TraceError` (ValueError) and
:class:`TraceIOError` (OSError), with the command line's text.
"""

from __future__ import annotations

from ._native import Cache
from ._errors import ConfigError, HearthError, TraceError, TraceIOError
from ._api import RATIO_COLUMNS, SIM_COLUMNS, analyze, mrc, policies, sim
from ._plugin import PluginPolicy, Policy, PythonLRU
from ._sweep import memory_hint, sweep, tasks

__all__ = [
    "Cache",
    "ConfigError",
    "HearthError",
    "PluginPolicy",
    "Policy",
    "PythonLRU",
    "SIM_COLUMNS",
    "RATIO_COLUMNS",
    "TraceError",
    "TraceIOError",
    "analyze",
    "memory_hint",
    "mrc",
    "policies",
    "sim",
    "sweep",
    "tasks",
]
__version__ = "0.1.0"

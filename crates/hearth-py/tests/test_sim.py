"""hearth.sim / hearth.mrc / hearth.policies against the real command line."""

from __future__ import annotations

import inspect
import json
import threading
import time
import warnings

import pandas as pd
import pytest

import hearth
from conftest import cli, cli_json

# Policies the CLI and the package share whatever else the registry grows.
POLICIES = ["lru", "arc", "2q", "mq:m=8,lifetime=5000", "lirs", "opt"]


def frame_rows(df: pd.DataFrame, columns=hearth.SIM_COLUMNS + hearth.RATIO_COLUMNS):
    return df[list(columns)].to_dict("records")


def test_policies_lists_the_registry(hearth_bin):
    df = hearth.policies()
    assert list(df.columns) == ["name", "description"]
    # The CLI lists the policies, a blank line, then the groups a policy list may name.
    listed = cli(hearth_bin, "policies").stdout.split("\n\n")[0]
    assert list(df["name"]) == [line.split()[0] for line in listed.splitlines() if line.strip()]


def test_object_mode_equals_cli_json(oracle, hearth_bin):
    sizes = "0.5%,1%,5%,64MiB"
    want = cli_json(hearth_bin, "sim", str(oracle), "-p", ",".join(POLICIES), "-s", sizes)
    df = hearth.sim(str(oracle), POLICIES, sizes)
    assert frame_rows(df) == want
    assert len(df) == 4 * len(POLICIES)
    assert set(df["policy"]) >= {"LRU", "ARC", "OPT"}
    assert list(df.columns[:7]) == hearth.SIM_COLUMNS
    assert (df["miss_ratio"] == 1 - df["hits"] / df["requests"]).all()


def test_block_mode_warmup_intervals_and_several_traces_equal_cli(oracle, hearth_bin, bundled_zst):
    """Block mode (synthetic and the bundled zstd CSV), a warm-up share, intervals and two traces in one call."""
    synth = "synth:zipf:20000:0.8"
    args = ["--requests", "60000", "--seed", "3", "--warmup", "10%", "--window", "20000"]
    want = cli_json(hearth_bin, "sim", synth, "synth:loop:20000", "-p", "lru,arc,opt", "-s", "5%,1MiB", *args)
    df = hearth.sim([synth, "synth:loop:20000"], "lru,arc,opt", ["5%", 1 << 20], requests=60000, seed=3,
                    warmup="10%", interval=20000)
    assert df[hearth.SIM_COLUMNS + hearth.RATIO_COLUMNS + ["interval_miss_ratios"]].to_dict("records") == want

    want = cli_json(hearth_bin, "sim", str(bundled_zst), "-p", "lru,mq", "-s", "1%,10%", "--block-size", "8KiB")
    assert frame_rows(hearth.sim(bundled_zst, ["lru", "mq"], [0.01, 0.1], block_size="8KiB")) == want


def test_mode_object_on_a_block_trace_and_warmup_count_equal_cli(hearth_bin, bundled_zst):
    want = cli_json(hearth_bin, "sim", str(bundled_zst), "--mode", "object", "-p", "lru,fifo", "-s", "16MiB",
                    "--warmup", "1000")
    got = hearth.sim(str(bundled_zst), ["lru", "fifo"], "16MiB", mode="object", warmup=1000)
    assert frame_rows(got) == want


def test_mrc_equals_cli(oracle, hearth_bin):
    sizes = "1%,5%,10%,50%"
    want = cli_json(hearth_bin, "mrc", str(oracle), "-m", "exact,shards,full", "-p", "lru", "-s", sizes,
                    "--rate", "10%")
    df = hearth.mrc(oracle, ["exact", "shards", "full"], "lru", sizes, rate=0.1)
    got = []
    for curve in want:
        for p in curve["points"]:
            got.append({"method": curve["method"], "rate": curve["rate"], **p})
    cols = ["method", "rate", "policy", "cache_bytes", "requests", "hits", "bytes", "hit_bytes"]
    assert df[cols].to_dict("records") == [{c: g[c] for c in cols} for g in got]
    # exact LRU equals the full LRU simulation on this trace
    exact = df[df.method == "exact"]["hits"].tolist()
    assert exact == df[df.method == "full"]["hits"].tolist()


def test_mrc_sample_seed_equals_cli(oracle, hearth_bin):
    sizes = "1%,10%,50%"
    cols = ["method", "rate", "policy", "cache_bytes", "requests", "hits", "bytes", "hit_bytes"]

    def both(seed):
        want = cli_json(hearth_bin, "mrc", str(oracle), "-m", "shards,mini", "-p", "lru,arc", "-s", sizes,
                        "--rate", "10%", "--sample-seed", str(seed))
        df = hearth.mrc(oracle, ["shards", "mini"], "lru,arc", sizes, rate=0.1, sample_seed=seed)
        got = [{"method": c["method"], "rate": c["rate"], **p} for c in want for p in c["points"]]
        return df[cols].to_dict("records"), [{c: g[c] for c in cols} for g in got]

    seven, seven_cli = both(7)
    assert seven == seven_cli
    zero, _ = both(0)
    assert seven != zero, "another seed draws another sample"


def test_mrc_shards_hot_keys_equals_cli(oracle, hearth_bin):
    cols = ["cache_bytes", "requests", "hits", "bytes", "hit_bytes"]
    runs = {}
    for hot in (0, 16):
        want = cli_json(hearth_bin, "mrc", str(oracle), "-m", "shards", "-s", "1%,10%,50%", "--rate", "10%",
                        "--shards-hot-keys", str(hot))
        assert want[0]["hot_keys"] == hot
        df = hearth.mrc(oracle, "shards", "lru", "1%,10%,50%", rate=0.1, shards_hot_keys=hot)
        runs[hot] = df[cols].to_dict("records")
        assert runs[hot] == [{c: p[c] for c in cols} for p in want[0]["points"]]
    assert runs[0] != runs[16], "the hot stratum changes the estimate"
    # Both front ends stratify on the same number of keys by default.
    want = cli_json(hearth_bin, "mrc", str(oracle), "-m", "shards", "-s", "1%,10%,50%", "--rate", "10%")
    assert want[0]["hot_keys"] == inspect.signature(hearth.mrc).parameters["shards_hot_keys"].default
    df = hearth.mrc(oracle, "shards", "lru", "1%,10%,50%", rate=0.1)
    assert df[cols].to_dict("records") == [{c: p[c] for c in cols} for p in want[0]["points"]]


def test_mrc_warns_where_the_cli_warns_about_a_small_sample(oracle, hearth_bin):
    """A 1% SHARDS sample of the oracle trace is too small to trust: a Python warning, as the CLI's."""
    cli_warning = cli(hearth_bin, "mrc", str(oracle), "-q", "-m", "shards", "--rate", "1%",
                      "--shards-hot-keys", "0").stderr
    assert "warning: the SHARDS sample holds 511 distinct keys" in cli_warning, cli_warning
    with pytest.warns(UserWarning, match="the SHARDS sample holds 511 distinct keys") as caught:
        hearth.mrc(oracle, "shards", rate="1%", shards_hot_keys=0)
    message = str(caught[0].message)
    assert "raise rate (or shards_items), or stratify it (shards_hot_keys=128)" in message, message
    assert caught[0].filename == __file__, "the warning points at the caller"
    with pytest.warns(UserWarning, match="holds 510 distinct keys") as caught:
        hearth.mrc(oracle, "shards", rate="1%")
    assert "stratify" not in str(caught[0].message)
    # A sample large enough says nothing, as the CLI.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hearth.mrc(oracle, "shards", "lru", "1%,10%,50%", rate="50%")


def test_gil_is_released_while_simulating():
    """Another Python thread keeps running while a simulation is under way."""
    done = threading.Event()
    result = {}

    def run():
        t = time.perf_counter()
        result["df"] = hearth.sim("synth:zipf:200000:0.9", ["lru", "arc"], "10%", requests=5_000_000, threads=1)
        result["seconds"] = time.perf_counter() - t
        done.set()

    worker = threading.Thread(target=run)
    worker.start()
    ticks, longest, last = 0, 0.0, time.perf_counter()
    while not done.is_set():
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
        ticks += 1
        time.sleep(0.001)
    worker.join()
    assert result["seconds"] > 0.2, "the simulation must take long enough to tell"
    # Holding the GIL would stall this loop for the whole run.
    assert longest < result["seconds"] / 2, (longest, result["seconds"], ticks)
    assert len(result["df"]) == 2


def test_help_texts_are_readable():
    for f in (hearth.sim, hearth.mrc, hearth.sweep, hearth.policies, hearth.Cache, hearth.Policy):
        assert f.__doc__ and len(f.__doc__) > 60, f
    assert "hearth sim --json" in hearth.sim.__doc__
    assert "hit(key, size)" in hearth.Policy.__doc__


def test_analyze_equals_cli(oracle, hearth_bin):
    for trace, extra in ((str(oracle), []), ("synth:zipf:5000:0.9", ["--requests", "30000"])):
        p = cli(hearth_bin, "analyze", trace, *extra, "--json")
        assert p.returncode == 0, p.stderr
        want = json.loads(p.stdout)
        kwargs = {"requests": 30000} if extra else {}
        assert hearth.analyze(trace, raw=True, **kwargs) == want
        a = hearth.analyze(trace, **kwargs)
        assert a["unique_keys"] == want["unique_keys"] and a["cold_accesses"] == want["cold_accesses"]
        assert a["reuse_distance"]["count"].tolist() == want["reuse_distance"]["counts"]
        assert list(a["frequency_curve"].columns) == ["keys_pct", "accesses_pct"]
        assert abs(a["temporal_distance"]["share"].sum() - 1) < 1e-9


def test_fsspec_urls_are_read_like_paths(oracle):
    try:
        import fsspec
    except ImportError:
        from conftest import need

        need(False, "fsspec is not installed (pip install fsspec)")
    want = hearth.sim(oracle, ["lru", "arc"], "1%,10%")
    # file:// is read in place; memory:// (like s3:// or https://) is copied to a temporary file first.
    fs = fsspec.filesystem("memory")
    fs.pipe("/hearth-test/cp.oracleGeneral.bin", oracle.read_bytes())
    for url in (f"file://{oracle}", "memory://hearth-test/cp.oracleGeneral.bin"):
        got = hearth.sim(url, ["lru", "arc"], "1%,10%")
        assert (got["trace"] == url).all()
        assert got.drop(columns="trace").equals(want.drop(columns="trace"))
        assert hearth.mrc(url, sizes="1%")["trace"].tolist() == [url]
    fs.pipe("/hearth-test/bad.txt", b"1\nzz\n")
    with pytest.raises(hearth.TraceError) as e:
        hearth.sim("memory://hearth-test/bad.txt", "lru", 1)
    assert str(e.value).startswith("memory://hearth-test/bad.txt:2: ")
    fs.rm("/hearth-test", recursive=True)


def test_ctrl_c_stops_a_long_simulation():
    """KeyboardInterrupt (Ctrl-C in a notebook) ends a run early instead of waiting for it."""
    import _thread

    timer = threading.Timer(0.3, _thread.interrupt_main)
    started = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        # Tens of seconds of work if it ran to the end.
        hearth.sim("synth:zipf:1000000:0.9", ["lru", "arc"], "10%", requests=200_000_000)
    assert time.perf_counter() - started < 5
    timer.join()
    # The module still works afterwards.
    assert len(hearth.sim("synth:loop:100", "lru", "50blocks", requests=1000)) == 1

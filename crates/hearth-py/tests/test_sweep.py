"""hearth.sweep on the local engine: the same rows as one hearth.sim call and as the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

import hearth
from hearth import _sweep
from conftest import cli, cli_json, need, oracle_slices

POLICIES = ["lru", "arc", "2q", "mq"]
SIZES = "1%,5%,10%,1MiB"


@pytest.fixture(scope="module")
def traces(oracle, tmp_path_factory):
    return oracle_slices(oracle, tmp_path_factory.mktemp("traces"), 3, 30000)


def test_tasks_split_by_trace_and_policy(traces):
    todo = hearth.tasks(traces, ["lru,mq:m=8,lifetime=5000", hearth.PythonLRU], SIZES)
    assert [(t[0], t[1]) for t in todo] == [(i, j) for i in range(3) for j in range(3)]
    assert todo[1][3] == "mq:m=8,lifetime=5000" and todo[2][3] is hearth.PythonLRU
    assert all(t[4] == SIZES for t in todo)


def test_local_sweep_equals_sim_and_cli(traces, hearth_bin, tmp_path):
    out = tmp_path / "sweep.csv"
    df = hearth.sweep(traces, POLICIES, SIZES, engine="local", workers=2, progress=False, output=out)
    assert len(df) == 3 * 4 * 4
    assert df.equals(hearth.sim(traces, POLICIES, SIZES))
    want = cli_json(hearth_bin, "sim", *map(str, traces), "-p", ",".join(POLICIES), "-s", SIZES)
    assert df[hearth.SIM_COLUMNS + hearth.RATIO_COLUMNS].to_dict("records") == want
    back = pd.read_csv(out)
    assert back[hearth.SIM_COLUMNS + hearth.RATIO_COLUMNS].to_dict("records") == want


def test_sweep_with_a_python_policy_and_parquet(traces, tmp_path):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        need(False, "pyarrow is not installed (pip install pyarrow)")
    out = tmp_path / "sweep.parquet"
    df = hearth.sweep(traces[:1], ["lru", hearth.PythonLRU], "1%,5%", progress=False, output=out)
    assert df[df.policy == "LRU"]["hits"].tolist() == df[df.policy == "PyLRU"]["hits"].tolist()
    assert pd.read_parquet(out).equals(df)


def test_sweep_rejects_bad_engines_and_outputs(traces):
    with pytest.raises(ValueError, match="engine"):
        hearth.sweep(traces, "lru", "1%", engine="spark", progress=False)
    with pytest.raises(ValueError, match="parquet, .csv or .json"):
        hearth.sweep(traces, "lru", "1%", output="x.xlsx", progress=False)


def test_sweep_file_runs_the_same_from_python_and_the_cli(traces, hearth_bin, tmp_path):
    """One sweep file: `hearth sweep FILE` and hearth.sweep(config=FILE) give the same table."""
    conf = tmp_path / "sweep.toml"
    names = [str(t) for t in traces]
    conf.write_text(
        "traces = [" + ", ".join(f'"{t}"' for t in names) + ', "synth:zipf:4000:0.9"]\n'
        'policies = "lru,arc,mq:m=4,lifetime=1000,opt"\n'
        'sizes = ["1%", "5%", "10%", "1MiB"]\n'
        'warmup = "10%"\n'
        "requests = 40000\n"
        'output = "from-python.csv"\n'
    )
    cli_out = tmp_path / "from-cli.json"
    p = cli(hearth_bin, "sweep", str(conf), "-q", "-o", str(cli_out))
    assert p.returncode == 0, p.stderr
    want = json.loads(cli_out.read_text())
    assert len(want) == 4 * 4 * 4
    df = hearth.sweep(config=conf, engine="local", workers=2, progress=False)
    assert df[hearth.SIM_COLUMNS + hearth.RATIO_COLUMNS].to_dict("records") == want
    back = pd.read_csv(tmp_path / "from-python.csv")
    assert back[hearth.SIM_COLUMNS + hearth.RATIO_COLUMNS].to_dict("records") == want
    # Arguments given to sweep() take precedence over the file's.
    few = hearth.sweep(config=conf, policies=["lru"], sizes="1%", output=tmp_path / "few.json", progress=False)
    assert few[hearth.SIM_COLUMNS + hearth.RATIO_COLUMNS].to_dict("records") == [r for r in want if r["policy"] == "LRU"][::4]


def test_bad_sweep_files_raise_config_errors(tmp_path):
    conf = tmp_path / "bad.toml"
    conf.write_text('traces = "synth:scan"\npolicies = "lru,belady2"\nsizes = "1%"\n')
    with pytest.raises(hearth.ConfigError, match="unknown policy"):
        hearth.sweep(config=conf, progress=False)
    with pytest.raises(TypeError, match="config"):
        hearth.sweep(progress=False)


class FakeRay:
    """The part of Ray's API that engine='ray' uses, running tasks inline and
    recording each task's options: what the sweep asks Ray to reserve."""

    def __init__(self, node_memory: int):
        self.node_memory = node_memory
        self.memory = {}  # (trace index, policy index) -> memory= option

    def is_initialized(self):
        return True

    def nodes(self):
        return [{"Alive": True, "Resources": {"CPU": 1.0, "memory": float(self.node_memory)}}]

    def put(self, value):
        return value

    def remote(self, **resources):
        assert resources["num_cpus"] == 1
        fake = self

        class Remote:
            def __init__(self, fn, options):
                self.fn, self.options_ = fn, options

            def options(self, **options):
                return Remote(self.fn, options)

            def remote(self, task, opts):
                fake.memory[(task[0], task[1])] = self.options_.get("memory")
                return Ref(self.fn(task, opts))

        return lambda fn: Remote(fn, {})

    def wait(self, refs, num_returns):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        return ref.rows


class Ref:
    def __init__(self, rows):
        self.rows = rows


@pytest.fixture
def fake_ray(monkeypatch):
    fake = FakeRay(node_memory=64 << 30)
    monkeypatch.setitem(sys.modules, "ray", fake)
    return fake


def test_ray_tasks_reserve_each_tasks_memory_hint(traces, fake_ray):
    pols = ["lru", "mq", "opt"]
    df = hearth.sweep(traces, pols, SIZES, engine="ray", progress=False)
    assert df.equals(hearth.sweep(traces, pols, SIZES, engine="local", progress=False))
    todo = hearth.tasks(traces, pols, SIZES)
    assert fake_ray.memory == {(t[0], t[1]): hearth.memory_hint(t) for t in todo}
    # From the trace's size: OPT tracks every key, MQ five times the resident ones.
    m = {pol: fake_ray.memory[(0, j)] for j, pol in enumerate(pols)}
    assert hearth.memory_hint(todo[0]) > _sweep.BASE_BYTES
    assert m["lru"] <= m["mq"] < m["opt"]


def test_the_memory_hint_follows_the_trace_size_and_can_be_overridden(traces, fake_ray, tmp_path):
    one = traces[0]
    two = tmp_path / one.name
    two.write_bytes(one.read_bytes() * 2)  # twice the records: twice the keys the model assumes
    base = _sweep.BASE_BYTES
    per_key = {t: hearth.memory_hint((0, 0, str(t), "lru", SIZES)) - base for t in (one, two)}
    assert per_key[two] == 2 * per_key[one]
    # Absolute sizes in block mode hold at most that many blocks, whatever the trace.
    assert hearth.memory_hint((0, 0, "synth:zipf:1000000:0.9", "lru", "400KiB"), {}) == base + 170 * 5 * 100
    # The override: bytes for every task, 0 for none, or a function of the task.
    hearth.sweep(traces, "lru", SIZES, engine="ray", progress=False, memory=123 << 20)
    assert set(fake_ray.memory.values()) == {123 << 20}
    hearth.sweep(traces, "lru", SIZES, engine="ray", progress=False, memory=0)
    assert set(fake_ray.memory.values()) == {None}
    hearth.sweep(traces, "lru", SIZES, engine="ray", progress=False, memory=lambda t: (t[0] + 1) << 20)
    assert fake_ray.memory == {(i, 0): (i + 1) << 20 for i in range(3)}
    # The estimate is held to the largest node's memory, so that every task can run.
    fake_ray.node_memory = base + 1
    hearth.sweep(traces, "opt", SIZES, engine="ray", progress=False)
    assert set(fake_ray.memory.values()) == {base + 1}


def test_the_memory_hint_bounds_a_tasks_peak_memory():
    """The model against the simulator: what a task holds beyond an idle one's
    peak (a task on a 1000-key trace, in a fresh process without Ray) stays
    within the hint's part beyond its base, for the policies that track the most keys."""
    child = (
        "import resource, sys, pandas, hearth\n"
        "from hearth._sweep import _run_task\n"
        "_run_task((0, 0, sys.argv[1], sys.argv[2], sys.argv[3]), {'requests': int(sys.argv[4])})\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)\n"
    )

    def peak(trace: str, policy: str, sizes: str, requests: int) -> int:
        p = subprocess.run([sys.executable, "-c", child, trace, policy, sizes, str(requests)],
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        return int(p.stdout.split()[-1])

    trace, sizes, requests = "synth:uniform:400000", "1%,10%,50%", 1_200_000
    idle = peak("synth:uniform:1000", "lru", sizes, 3000)
    for policy in ("lru", "mq", "opt"):
        held = peak(trace, policy, sizes, requests) - idle
        model = hearth.memory_hint((0, 0, trace, policy, sizes), {"requests": requests}) - _sweep.BASE_BYTES
        print(f"{policy}: {held / 2**20:.0f} MiB held beyond an idle task, {model / 2**20:.0f} MiB in the model")
        assert held < model

"""hearth.sweep on the local engine: the same rows as one hearth.sim call and as the CLI."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import hearth
from conftest import cli, cli_json, oracle_slices

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
    assert df[hearth.SIM_COLUMNS].to_dict("records") == want
    back = pd.read_csv(out)
    assert back[hearth.SIM_COLUMNS].to_dict("records") == want


def test_sweep_with_a_python_policy_and_parquet(traces, tmp_path):
    pytest.importorskip("pyarrow")
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
    assert df[hearth.SIM_COLUMNS].to_dict("records") == want
    back = pd.read_csv(tmp_path / "from-python.csv")
    assert back[hearth.SIM_COLUMNS].to_dict("records") == want
    # Arguments given to sweep() take precedence over the file's.
    few = hearth.sweep(config=conf, policies=["lru"], sizes="1%", output=tmp_path / "few.json", progress=False)
    assert few[hearth.SIM_COLUMNS].to_dict("records") == [r for r in want if r["policy"] == "LRU"][::4]


def test_bad_sweep_files_raise_config_errors(tmp_path):
    conf = tmp_path / "bad.toml"
    conf.write_text('traces = "synth:scan"\npolicies = "lru,belady2"\nsizes = "1%"\n')
    with pytest.raises(hearth.ConfigError, match="unknown policy"):
        hearth.sweep(config=conf, progress=False)
    with pytest.raises(TypeError, match="config"):
        hearth.sweep(progress=False)

"""hearth.sweep on the local engine: the same rows as one hearth.sim call and as the CLI."""

from __future__ import annotations

import pandas as pd
import pytest

import hearth
from conftest import cli_json, oracle_slices

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
    with pytest.raises(ValueError, match="parquet or .csv"):
        hearth.sweep(traces, "lru", "1%", output="x.xlsx", progress=False)

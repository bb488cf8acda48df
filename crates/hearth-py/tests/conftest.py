"""Shared fixtures: the bundled traces, the real `hearth` command line, and Ray."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / "shared" / "data"
ORACLE = SHARED / "cloudPhysicsIO.oracleGeneral.bin"
BUNDLED_ZST = REPO / "data" / "cloudPhysicsIO.csv.zst"
IN_CI = os.environ.get("CI") == "true"


def need(condition: bool, why: str) -> None:
    """Skip locally when something a test talks to is missing; fail in CI (CI=true)."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{why} (CI=true: missing test dependencies fail instead of skipping)")
    pytest.skip(why)


@pytest.fixture(scope="session")
def oracle() -> Path:
    need(ORACLE.exists(), f"{ORACLE} is missing (shared/ beside the checkout)")
    return ORACLE


@pytest.fixture(scope="session")
def hearth_bin() -> Path:
    """The `hearth` CLI: $HEARTH_BIN, else target/debug (which `cargo test --workspace`
    has just built from this checkout), else target/release, else `cargo build
    --release -p hearth`."""
    env = os.environ.get("HEARTH_BIN")
    if env:
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    for profile in ("debug", "release"):
        b = target / profile / "hearth"
        if b.exists():
            return b
    need(shutil.which("cargo") is not None, "no hearth binary and no cargo to build one")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "hearth"], cwd=REPO, check=True)
    return target / "release" / "hearth"


def cli(hearth_bin: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(hearth_bin), *args], capture_output=True, text=True, timeout=600)


def cli_json(hearth_bin: Path, *args: str):
    p = cli(hearth_bin, *args, "--json", "-q")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def cli_error(hearth_bin: Path, *args: str) -> str:
    """The CLI's error text (after `hearth: error: `)."""
    p = cli(hearth_bin, *args)
    assert p.returncode != 0, p.stdout
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("hearth: error: "), p.stderr
    return line[len("hearth: error: ") :]


def oracle_slices(src: Path, out_dir: Path, n: int, records: int) -> List[Path]:
    """`n` small oracleGeneral traces cut from `src`: consecutive runs of `records`
    records, with next-access times recomputed within each slice."""
    data = src.read_bytes()
    rec = struct.Struct("<IQIq")
    paths = []
    for i in range(n):
        rows = [rec.unpack_from(data, (i * records + j) * rec.size) for j in range(records)]
        next_seen: dict = {}
        out = bytearray(rec.size * records)
        for j in range(records - 1, -1, -1):
            t, oid, size, _ = rows[j]
            rec.pack_into(out, j * rec.size, t, oid, size, next_seen.get(oid, -1))
            next_seen[oid] = j + 1  # 1-based vtimes, as libCacheSim writes them
        p = out_dir / f"slice{i}.oracleGeneral.bin"
        p.write_bytes(bytes(out))
        paths.append(p)
    return paths

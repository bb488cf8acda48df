"""Shared fixtures: the bundled traces, the real `hearth` command line, and Ray."""

from __future__ import annotations

import functools
import http.server
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

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
def bundled_zst() -> Path:
    need(BUNDLED_ZST.exists(), f"{BUNDLED_ZST} is missing from this checkout")
    return BUNDLED_ZST


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


def oracle_trace(path: Path, records: int, keys: int, seed: int) -> Path:
    """An oracleGeneral trace of `records` requests to `keys` objects (skewed
    towards low ids, sizes 512 B to 64 KiB), next-access times included."""
    rng = random.Random(seed)
    sizes = [rng.choice((512, 4096, 16384, 65536)) for _ in range(keys)]
    ids = [min(int(rng.paretovariate(0.7)), keys) - 1 for _ in range(records)]
    rec = struct.Struct("<IQIq")
    out = bytearray(rec.size * records)
    next_seen: dict = {}
    for j in range(records - 1, -1, -1):
        oid = ids[j]
        rec.pack_into(out, j * rec.size, j, oid, sizes[oid], next_seen.get(oid, -1))
        next_seen[oid] = j + 1
    path.write_bytes(bytes(out))
    return path


class HttpServer:
    """Python's http.server on 127.0.0.1 in a thread, serving `root`, logging
    (method, path) of every request. It answers no range requests."""

    def __init__(self, root: Path):
        self.requests: List[Tuple[str, str]] = []
        log = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args) -> None:
                log.append((self.command, self.path))

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def gets(self, name: str) -> int:
        return sum(1 for m, p in self.requests if m == "GET" and p == "/" + name)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def need_modules(*names: str) -> None:
    """`need` for Python modules, naming what to install."""
    import importlib.util

    missing = [n for n in names if importlib.util.find_spec(n) is None]
    need(not missing, f"missing Python modules {missing}: pip install aiohttp s3fs 'moto[server]'")


class S3Server:
    """moto's S3 server on 127.0.0.1 (a process of its own), with `env` the
    variables that point boto and s3fs at it."""

    def __init__(self, log: Path):
        need_modules("moto", "flask", "s3fs", "aiohttp")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        self.endpoint = f"http://127.0.0.1:{port}"
        self.env: Dict[str, str] = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        deadline = time.time() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert self.proc.poll() is None, log.read_text()
                assert time.time() < deadline, "moto's server did not start:\n" + log.read_text()
                time.sleep(0.2)

    def upload(self, bucket: str, files: List[Path]) -> List[str]:
        import boto3

        s3 = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
        s3.create_bucket(Bucket=bucket)
        for f in files:
            s3.upload_file(str(f), bucket, f.name)
        return [f"s3://{bucket}/{f.name}" for f in files]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def url_traces(tmp_path_factory) -> List[Path]:
    """Two traces for the URL tests, the first past 6 MiB: fsspec reads
    HTTP files in blocks of 5 MiB, and a server without range requests
    refuses the second block."""
    d = tmp_path_factory.mktemp("url-traces")
    return [oracle_trace(d / "big.oracleGeneral.bin", 300_000, 60_000, 1),
            oracle_trace(d / "small.oracleGeneral.bin", 40_000, 8_000, 2)]


@pytest.fixture(scope="session")
def http_server(url_traces):
    need_modules("fsspec", "aiohttp")
    server = HttpServer(url_traces[0].parent)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    server = S3Server(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()

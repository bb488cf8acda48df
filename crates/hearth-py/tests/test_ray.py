"""hearth.sweep on a real two-node Ray cluster started with `ray start`.

The head and a second worker node run on this machine (distinct ports, a
private temp dir), each with one CPU, on 127.0.0.2: Ray rewrites 127.0.0.1 and
"localhost" to the machine's outward address, and every connection here must
stay on the loopback range. Both are started with `--block` so
that stopping them is ending the processes this test started (SIGTERM to
each `ray start`, then its process group), not `ray stop`, which would stop
every Ray on the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import hearth
from conftest import cli_json, need, oracle_slices

POLICIES = ["lru", "arc", "2q", "mq"]
IP = "127.0.0.2"
RAY_INIT = {"_node_ip_address": IP}
SIZES = "1%,5%,10%,1MiB"


def free_ports(n: int) -> list:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Node:
    """One `ray start --block` process and its log."""

    def __init__(self, args: list, log: Path):
        self.log = log
        self.proc = subprocess.Popen(
            args, stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        try:  # whatever it started and left behind: its own process group
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=10)


def node_ports() -> list:
    (nm, om, agent_grpc, agent_http, metrics, renv, wmin) = free_ports(7)
    return [
        f"--node-manager-port={nm}",
        f"--object-manager-port={om}",
        f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--dashboard-agent-listen-port={agent_http}",
        f"--metrics-export-port={metrics}",
        f"--runtime-env-agent-port={renv}",
    ]


@pytest.fixture(scope="module")
def ray_cluster():
    try:
        import ray  # noqa: F401
    except ImportError:
        need(False, "ray is not installed (pip install ray): the Ray tests cannot run")
    ray_exe = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    need(Path(ray_exe).exists(), "the `ray` command is not on PATH")
    tmp = Path(tempfile.mkdtemp(prefix="hray", dir="/tmp"))  # short: Ray's socket paths are limited
    (gcs,) = free_ports(1)
    env_flags = ["--num-cpus=1", "--object-store-memory=200000000", "--disable-usage-stats", "--block"]
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    head = Node(
        [ray_exe, "start", "--head", f"--port={gcs}", f"--temp-dir={tmp}",
         "--include-dashboard=false", f"--node-ip-address={IP}", *node_ports(), *env_flags],
        tmp / "head.log",
    )
    nodes = [head]
    address = f"{IP}:{gcs}"
    try:
        import ray

        deadline = time.time() + 120
        while True:
            try:
                with socket.create_connection((IP, gcs), timeout=1):
                    break
            except OSError:
                assert head.proc.poll() is None, head.log.read_text()
                assert time.time() < deadline, "Ray head did not start:\n" + head.log.read_text()
                time.sleep(0.5)
        worker = Node(
            [ray_exe, "start", f"--address={address}", f"--node-ip-address={IP}", *node_ports(), *env_flags],
            tmp / "worker.log",
        )
        nodes.append(worker)
        ray.init(address=address, log_to_driver=False, **RAY_INIT)
        try:
            while len([n for n in ray.nodes() if n["Alive"]]) < 2:
                assert worker.proc.poll() is None, worker.log.read_text()
                assert time.time() < deadline, "the worker node did not join:\n" + worker.log.read_text()
                time.sleep(0.5)
        finally:
            ray.shutdown()
        yield address, nodes
    finally:
        for n in reversed(nodes):
            n.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def traces(oracle, tmp_path_factory):
    return oracle_slices(oracle, tmp_path_factory.mktemp("ray-traces"), 3, 30000)


def test_two_nodes_each_with_one_cpu(ray_cluster):
    import ray

    address, _ = ray_cluster
    ray.init(address=address, log_to_driver=False, **RAY_INIT)
    try:
        alive = [n for n in ray.nodes() if n["Alive"]]
        assert len(alive) == 2 and all(n["Resources"].get("CPU") == 1.0 for n in alive)

        # SPREAD: with the default strategy a loaded machine may run all eight on the first node
        # before the second one's worker process has started.
        @ray.remote(num_cpus=1, scheduling_strategy="SPREAD")
        def where(_):
            time.sleep(0.2)
            return ray.get_runtime_context().get_node_id()

        assert len(set(ray.get([where.remote(i) for i in range(8)]))) == 2, "tasks ran on both nodes"
    finally:
        ray.shutdown()


def test_ray_sweep_equals_local_and_cli(ray_cluster, traces, hearth_bin):
    address, _ = ray_cluster
    started = time.perf_counter()
    on_ray = hearth.sweep(traces, POLICIES, SIZES, engine="ray", address=address, progress=False,
                          ray_init=RAY_INIT)
    ray_s = time.perf_counter() - started
    started = time.perf_counter()
    local = hearth.sweep(traces, POLICIES, SIZES, engine="local", progress=False)
    local_s = time.perf_counter() - started
    print(f"3 traces x 4 policies x 4 sizes: ray {ray_s:.2f} s (with connecting), local {local_s:.2f} s")
    assert len(on_ray) == 3 * 4 * 4
    assert on_ray.equals(local)
    want = cli_json(hearth_bin, "sim", *map(str, traces), "-p", ",".join(POLICIES), "-s", SIZES)
    assert on_ray[hearth.SIM_COLUMNS + hearth.RATIO_COLUMNS].to_dict("records") == want


def _ancestors(pid: int) -> set:
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return seen


def _running_task_workers(roots: set) -> list:
    """Our cluster's worker processes while they run a sweep task (Ray retitles them)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"ray::_run_task" in cmd and _ancestors(int(entry)) & roots:
            found.append(int(entry))
    return found


def test_sweep_survives_a_killed_worker(ray_cluster, traces, oracle):
    """kill -9 of a worker process that is running a task: Ray retries it and the sweep is complete and right."""
    address, nodes = ray_cluster
    # Tasks long enough to be caught running (0.2 to 0.8 s here): a Python policy.
    traces = [oracle, *traces]
    policies = ["lru", hearth.PythonLRU]
    want = hearth.sweep(traces, policies, SIZES, engine="local", progress=False)
    roots = {n.proc.pid for n in nodes}
    killed = []

    def killer(stop: threading.Event):
        while not stop.is_set() and not killed:
            for pid in _running_task_workers(roots):
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    break
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    stop = threading.Event()
    t = threading.Thread(target=killer, args=(stop,))
    t.start()
    try:
        got = hearth.sweep(traces, policies, SIZES, engine="ray", address=address, progress=False,
                           max_retries=3, ray_init=RAY_INIT)
    finally:
        stop.set()
        t.join()
    assert killed, "no running task worker was found to kill"
    assert got.equals(want)


def test_a_private_ray_writes_no_token_file(tmp_path):
    """sweep(engine='ray') without an address starts a private Ray: with a token
    of its own (RAY_AUTH_TOKEN), so no ~/.ray/auth_token is left for later
    clients to send to clusters that do not know it, and the environment is put back."""
    try:
        import ray  # noqa: F401
    except ImportError:
        need(False, "ray is not installed (pip install ray): the Ray tests cannot run")
    script = (
        "import os, hearth\n"
        "df = hearth.sweep('synth:zipf:1000:0.9', ['lru', 'arc'], '10%', engine='ray', requests=20000,\n"
        "                  progress=False, ray_init={'num_cpus': 1, 'include_dashboard': False,\n"
        "                                            '_node_ip_address': '127.0.0.2'})\n"
        "assert df.equals(hearth.sweep('synth:zipf:1000:0.9', ['lru', 'arc'], '10%', requests=20000, progress=False))\n"
        "print(sorted(v for v in os.environ if v.startswith('RAY_AUTH')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(HOME=str(tmp_path), RAY_USAGE_STATS_ENABLED="0")
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == "[]"
    assert not (tmp_path / ".ray" / "auth_token").exists()


URL_POLICIES = ["lru", "arc"]
URL_SIZES = "1%,10%,4MiB"


def test_ray_sweep_reads_http_and_s3_urls_on_the_workers(ray_cluster, url_traces, http_server, s3_server,
                                                         monkeypatch):
    """Traces by URL: each task downloads its own trace (one GET per task;
    the driver only asks the sizes); S3 settings reach the workers through
    Ray's runtime_env. The rows equal a local sweep of the same files."""
    address, _ = ray_cluster
    want = hearth.sweep(url_traces, URL_POLICIES, URL_SIZES, engine="local", progress=False)
    for k, v in s3_server.env.items():  # the driver asks S3 for the sizes (the memory hint)
        monkeypatch.setenv(k, v)
    names = [p.name for p in url_traces]
    sources = {
        "http": [f"{http_server.url}/{n}" for n in names],
        "s3": s3_server.upload("ray-traces", url_traces),
    }
    for scheme, urls in sources.items():
        gets = {n: http_server.gets(n) for n in names}
        got = hearth.sweep(urls, URL_POLICIES, URL_SIZES, engine="ray", address=address, progress=False,
                           ray_init={**RAY_INIT, "runtime_env": {"env_vars": s3_server.env}})
        assert got.drop(columns="trace").equals(want.drop(columns="trace")), scheme
        assert got.trace.unique().tolist() == urls
        if scheme == "http":
            assert {n: http_server.gets(n) - gets[n] for n in names} == {n: len(URL_POLICIES) for n in names}

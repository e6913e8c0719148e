"""cmx.workloads.host.sampler against real processes and real sockets (the connection probes against the
real Redis, PostgreSQL and RabbitMQ: tests/integration/test_sampler_probes.py).

Each test runs the sampler as its own process (``python -m cmx.workloads.host.sampler``), stops it with
SIGTERM and reads the files it leaves in the run dir.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MB = 1 << 20

# Allocates 50 MB, forks a child that adds 20 MB of its own (and shares the 50 MB
# copy-on-write), optionally makes the child spin, then writes the pidfiles once both are ready.
WORKER = textwrap.dedent("""
    import os, sys, time
    pidfile, childfile, spin = sys.argv[1], sys.argv[2], sys.argv[3] == "spin"
    block = bytearray(b"\\x01") * (50 << 20)
    parent = os.getpid()
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        own = bytearray(b"\\x02") * (20 << 20)
        os.write(w, b"ready")
        while os.getppid() == parent:  # ends with its parent
            if not spin:
                time.sleep(0.05)
        os._exit(0)
    os.read(r, 5)
    for path, pid in ((childfile, child), (pidfile, parent)):
        with open(path + ".tmp", "w") as f:
            f.write(f"{pid}\\n")
        os.replace(path + ".tmp", path)
    time.sleep(120)
""")

SLEEPER = "import time; time.sleep(120)"

# A TCP listener on a free loopback port with a forked child (which inherits the socket).
LISTENER = textwrap.dedent("""
    import os, socket, sys, time
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        while os.getppid() == parent:
            time.sleep(0.05)
        os._exit(0)
    print(s.getsockname()[1], child, flush=True)
    time.sleep(120)
""")


@dataclass
class SamplerOutput:
    pid: int
    samples: list[dict]
    peaks: list[dict]
    connections: list[dict]
    summary: dict
    memory: list[dict]
    raw: dict[str, str]  # every file in the run dir, plus the sampler's stdout/stderr

    def rows(self, role: str, pid: int | None = None) -> list[dict]:
        return [r for r in self.samples if r["role"] == role and (pid is None or int(r["pid"]) == pid)]


class Sampler:
    """The sampler as a subprocess: start, wait until it is up, stop with SIGTERM, read its files."""

    def __init__(self, run_dir: Path, *args: str, env: dict | None = None) -> None:
        self.run_dir = run_dir
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cmx.workloads.host.sampler", "--run-dir", str(run_dir), "--host", "h1", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(lambda: (run_dir / "sampler.pid").exists(), what="sampler.pid")

    def stop(self) -> SamplerOutput:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=15)
        assert self.proc.returncode == 0, err
        raw = {p.name: p.read_text() for p in self.run_dir.iterdir()}
        raw["stdout"], raw["stderr"] = out, err
        return SamplerOutput(
            pid=self.proc.pid,
            samples=read_csv(self.run_dir / "samples.csv", "host,pid,role,ts,rss_bytes,pss_bytes,cpu_percent"),
            peaks=read_csv(self.run_dir / "peaks.csv", "host,pid,role,name,vmhwm_bytes"),
            connections=read_csv(self.run_dir / "connections.csv", "host,role,kind,ts,count,client"),
            summary=json.loads((self.run_dir / "sampler.json").read_text()),
            raw=raw,
            memory=read_csv(self.run_dir / "server_memory.csv", "host,role,kind,ts,node,used_bytes"),
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def read_csv(path: Path, header: str) -> list[dict]:
    with open(path, newline="") as f:
        assert f.readline().rstrip("\n") == header
        f.seek(0)
        return list(csv.DictReader(f))


def wait_for(predicate, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def read_pid(path: Path) -> int:
    wait_for(path.exists, what=str(path))
    return int(path.read_text())


@pytest.fixture
def spawn():
    """Start helper processes; kill them (and so their self-ending children) afterwards."""
    procs: list[subprocess.Popen] = []

    def start(code: str, *args: str, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", code, *args], **kwargs)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.fixture
def sampler(tmp_path):
    started: list[Sampler] = []

    def start(*args: str, env: dict | None = None) -> Sampler:
        s = Sampler(tmp_path / "run", *args, env=env)
        started.append(s)
        return s

    yield start
    for s in started:
        s.kill()


def test_worker_and_child_memory_cpu_and_peaks(tmp_path, spawn, sampler):
    pidfile, childfile = tmp_path / "worker.pid", tmp_path / "child.pid"
    spawn(WORKER, str(pidfile), str(childfile), "spin")
    worker, child = read_pid(pidfile), read_pid(childfile)

    duration, interval = 1.5, 0.2
    s = sampler("--watch", f"worker={pidfile}")
    time.sleep(duration)
    out = s.stop()

    worker_rows, child_rows = out.rows("worker", worker), out.rows("worker-child", child)
    assert worker_rows and child_rows
    assert {int(r["pid"]) for r in out.rows("worker")} == {worker}
    assert {int(r["pid"]) for r in out.rows("worker-child")} == {child}
    assert all(r["host"] == "h1" for r in out.samples)
    assert max(int(r["rss_bytes"]) for r in worker_rows) >= 50 * MB
    assert max(int(r["rss_bytes"]) for r in child_rows) >= 65 * MB  # its 20 MB + the 50 MB it shares

    with_pss = [r for r in worker_rows + child_rows if r["pss_bytes"]]
    assert with_pss and len(with_pss) < len(worker_rows + child_rows)  # PSS on some ticks only
    assert all(int(r["pss_bytes"]) <= int(r["rss_bytes"]) for r in with_pss)
    # The 50 MB shared copy-on-write counts half in each PSS, whole in each RSS.
    child_pss = [r for r in with_pss if r["role"] == "worker-child"]
    assert child_pss and all(int(r["pss_bytes"]) <= int(r["rss_bytes"]) - 15 * MB for r in child_pss)

    # CPU: the child spins, the worker sleeps; the first reading of a process has no rate.
    assert child_rows[0]["cpu_percent"] == ""
    child_cpu = sorted(float(r["cpu_percent"]) for r in child_rows[1:])
    worker_cpu = [float(r["cpu_percent"]) for r in worker_rows[1:]]
    assert child_cpu[len(child_cpu) // 2] >= 30
    assert max(worker_cpu) <= 25

    peaks = {int(p["pid"]): p for p in out.peaks}
    for pid, rows in ((worker, worker_rows), (child, child_rows)):
        assert int(peaks[pid]["vmhwm_bytes"]) >= max(int(r["rss_bytes"]) for r in rows)
        assert peaks[pid]["name"].startswith("python")
    assert peaks[worker]["role"] == "worker" and peaks[child]["role"] == "worker-child"

    own = out.rows("sampler")
    assert own and {int(r["pid"]) for r in own} == {out.pid}
    assert all(int(r["rss_bytes"]) > 5 * MB for r in own)
    assert out.pid in peaks

    summary = out.summary
    assert duration / interval * 0.5 <= summary["ticks"] <= duration / interval * 1.5 + 2
    assert len({r["ts"] for r in worker_rows}) == len(worker_rows) == summary["ticks"]
    assert 0 < summary["cpu_seconds"] < duration
    assert summary["wall_seconds"] >= duration
    assert summary["pss_rounds"] >= 1 and summary["complete"] is True and summary["errors"] == []
    assert not (tmp_path / "run" / "sampler.pid").exists()
    assert not [name for name in out.raw if name.endswith(".tmp")]


# A worker with one forked pool child, a program it runs (`sleep`, as Celery runs `uname -p`) and a
# grandchild forked by its child (as a task may fork); writes the pids once all are up.
WORKER_WITH_HELPERS = textwrap.dedent("""
    import os, subprocess, sys, time
    pidfile, out = sys.argv[1], sys.argv[2]
    parent = os.getpid()
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        grandchild = os.fork()
        if grandchild == 0:
            while os.getppid() != 1 and os.path.exists(f"/proc/{parent}"):
                time.sleep(0.05)
            os._exit(0)
        os.write(w, f"{grandchild}\\n".encode())
        while os.getppid() == parent:
            time.sleep(0.05)
        os._exit(0)
    grandchild = int(os.read(r, 32))
    helper = subprocess.Popen(["sleep", "120"])
    with open(out, "w") as f:
        f.write(f"{child} {grandchild} {helper.pid}\\n")
    with open(pidfile + ".tmp", "w") as f:
        f.write(f"{parent}\\n")
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(120)
""")


def test_only_forked_direct_children_are_pool_slots(tmp_path, spawn, sampler):
    pidfile, pids = tmp_path / "worker.pid", tmp_path / "pids"
    spawn(WORKER_WITH_HELPERS, str(pidfile), str(pids))
    worker = read_pid(pidfile)
    child, grandchild, helper = map(int, pids.read_text().split())
    try:
        s = sampler("--watch", f"worker={pidfile}")
        time.sleep(0.8)
        out = s.stop()
    finally:
        for pid in (helper, grandchild):  # the worker's own end (the spawn fixture) ends its child
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    roles = {int(r["pid"]): r["role"] for r in out.samples if r["role"].startswith("worker")}
    # A slot of the pool is a child running the worker's own program; a program the worker runs
    # and a child's own fork are the worker's memory, not slots (peak_*_per_slot_bytes divides by slots).
    assert roles == {worker: "worker", child: "worker-child", grandchild: "worker", helper: "worker"}
    peaks = {int(p["pid"]): p for p in out.peaks}
    assert peaks[helper]["name"] == "sleep" and peaks[helper]["role"] == "worker"


# Writes its pidfile, waits for the go file, then holds 120 MB for a moment and frees it.
SPIKE = textwrap.dedent("""
    import os, sys, time
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(f"{os.getpid()}\\n")
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.02)
    block = bytearray(b"\\x01") * (120 << 20)
    time.sleep(0.6)
    del block
    time.sleep(120)
""")


def test_a_new_memory_high_reads_pss_whatever_the_spacing(tmp_path, spawn, sampler):
    # Regular PSS rounds only on the first tick (every 10,000th tick after that), and a budget so
    # small that a round would push the next one minutes away: the spike must still get its PSS.
    pidfile, go = tmp_path / "worker.pid", tmp_path / "go"
    spawn(SPIKE, str(pidfile), str(go))
    wait_for(pidfile.exists, what="worker.pid")
    s = sampler("--interval", "0.1", "--pss-every", "10000", "--pss-budget", "0.0001", "--watch", f"worker={pidfile}")
    time.sleep(0.5)  # the regular first-tick round is behind us
    go.touch()
    time.sleep(2.0)
    out = s.stop()

    rows = out.rows("worker")
    peak_rss = max(int(r["rss_bytes"]) for r in rows)
    pss = [int(r["pss_bytes"]) for r in rows if r["pss_bytes"]]
    assert peak_rss > 120 * MB
    assert max(pss) > 110 * MB  # the spike's PSS was read while it lasted
    # ... by a handful of forced rounds, not by reading PSS on every tick
    assert 2 <= out.summary["pss_rounds"] < len(rows) / 2


def test_pidfile_is_read_again_every_tick(tmp_path, spawn, sampler):
    pidfile = tmp_path / "worker.pid"
    s = sampler("--interval", "0.1", "--watch", f"worker={pidfile}")
    time.sleep(0.5)  # the pidfile does not exist yet
    first = spawn(SLEEPER)
    pidfile.write_text(f"{first.pid}\n")
    time.sleep(0.6)
    second = spawn(SLEEPER)
    pidfile.write_text(f"{second.pid}\n")
    time.sleep(0.6)
    out = s.stop()

    first_ts = [float(r["ts"]) for r in out.rows("worker", first.pid)]
    second_ts = [float(r["ts"]) for r in out.rows("worker", second.pid)]
    assert len(first_ts) >= 2 and len(second_ts) >= 2
    assert max(first_ts) < min(second_ts)  # the first is still alive, but no longer watched
    assert {r["role"] for r in out.samples} == {"sampler", "worker"}


def test_watch_port_samples_the_listener_and_its_children(tmp_path, spawn, sampler):
    listener = spawn(LISTENER, stdout=subprocess.PIPE, text=True)
    port, child = map(int, listener.stdout.readline().split())

    s = sampler("--interval", "0.1", "--watch-port", f"service={port}", "--watch-port", "broker=1")
    time.sleep(1.0)
    out = s.stop()

    assert {int(r["pid"]) for r in out.rows("service")} == {listener.pid, child}
    assert len(out.rows("service", child)) >= 5
    assert os.getpid() not in {int(r["pid"]) for r in out.samples}  # the listener's parent is not watched
    assert out.rows("broker") == []
    assert out.summary["errors"] == ["watch-port broker=1: no process listened on it"]


def test_without_a_spec_the_probe_counts_nothing_and_says_why(tmp_path, sampler):
    env = {**os.environ, "CMX_BROKER_URL": "redis://127.0.0.1:6379/0"}
    out = sampler("--connections", "broker=redis", "--conn-interval", "0.2", env=env)
    time.sleep(0.6)
    out = out.stop()
    assert out.connections == []
    assert out.summary["errors"] == [
        "connections broker=redis: ProbeError: no spec.json in the run dir: the run's clients cannot be told apart"
    ]


def test_bad_arguments_exit_2(tmp_path):
    for args in (
        ["--watch", "worker"],
        ["--watch-port", "broker=99999"],
        ["--connections", "broker=kafka"],
        ["--interval", "0"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "cmx.workloads.host.sampler", "--run-dir", str(tmp_path), "--host", "h1", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 2, args


def test_error_log_redacts_secrets_and_records_each_failure_once():
    from cmx.workloads.host.sampler_output import ErrorLog

    url = "redis://:p%40ss-456@broker.lab:6379/0"
    log = ErrorLog([url, "p%40ss-456", "p@ss-456"])
    log.record("connections broker=redis", RuntimeError(f"cannot reach {url} (password p@ss-456)"))
    log.record("connections broker=redis", RuntimeError("a second failure of the same probe"))
    log.record("connections backend=rabbitmq", "GET http://admin:other-secret@mq:15672/api/connections failed")
    assert log.items == [
        "connections broker=redis: RuntimeError: cannot reach *** (password ***)",
        "connections backend=rabbitmq: GET http://***@mq:15672/api/connections failed",
    ]


def test_a_mark_reads_pss_of_every_watched_process_at_once(tmp_path, spawn, sampler):
    """The run's clock start and drain (workloads/runtime/runmarks.py) each get a PSS reading of every
    watched process, whatever the PSS schedule says, and the sampler writes down when."""
    from cmx.workloads.runtime.runmarks import mark

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc = spawn("import time; time.sleep(60)")
    (run_dir / "w.pid").write_text(str(proc.pid))
    s = sampler("--watch", f"worker={run_dir / 'w.pid'}", "--interval", "0.5", "--pss-every", "100000")
    wait_for(lambda: (run_dir / "samples.csv").exists(), what="samples.csv")
    time.sleep(1.2)  # past the first ticks (a first tick reads PSS as a new high)
    assert mark(run_dir, "clock", wait_s=10)
    assert mark(run_dir, "drain", wait_s=10)
    assert mark(run_dir, "drain", wait_s=0)  # once only: a second mark is already read
    out = s.stop()
    marks = read_csv(run_dir / "sample_marks.csv", "host,name,ts")
    assert [(m["host"], m["name"]) for m in marks] == [("h1", "clock"), ("h1", "drain")]
    for m in marks:
        at = [r for r in out.rows("worker", proc.pid) if r["ts"] == m["ts"]]
        assert len(at) == 1 and int(at[0]["pss_bytes"]) > 0, (m, at)
    assert out.summary["marks"] == {m["name"]: float(m["ts"]) for m in marks}

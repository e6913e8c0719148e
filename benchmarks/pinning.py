"""Placing a benchmark's processes on this machine's two cores (capture_overhead.py, capture_toggle.py):
a child on a CPU at a nice, the benchmark's own redis-server, the machine's RabbitMQ node's threads
moved and put back, and stopping what was started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time


def placed(cpu: int | None, nice: int):
    """A preexec_fn: the child on ``cpu`` (if pinning) at ``nice``, its Ctrl-C working even where this
    benchmark was started with SIGINT ignored (``cmd &``)."""

    def place():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
            os.setpriority(os.PRIO_PROCESS, 0, nice)

    return place


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, and SIGKILL after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def own_redis(cpu: int | None) -> tuple[subprocess.Popen, str]:
    """A redis-server of this benchmark's own on a free loopback port (on ``cpu`` at nice -10), nothing persisted."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=placed(cpu, -10))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("own redis-server did not answer within 10 s")


def rabbit_node():
    """The machine's one RabbitMQ node (its beam.smp process, psutil)."""
    import psutil

    beams = [p for p in psutil.process_iter(["name", "cmdline"]) if p.info["name"] == "beam.smp"]
    beams = [p for p in beams if "rabbit" in " ".join(p.info["cmdline"] or [])]
    if len(beams) != 1:
        raise RuntimeError(f"found {len(beams)} RabbitMQ nodes (beam.smp), expected one")
    return beams[0]


class PinnedRabbit:
    """The machine's RabbitMQ node's threads on one CPU at nice -10 while the benchmark runs; their own
    affinity and nice put back after (also on Ctrl-C)."""

    def __init__(self, cpu: int):
        self.saved = {}
        for t in rabbit_node().threads():
            self.saved[t.id] = (os.sched_getaffinity(t.id), os.getpriority(os.PRIO_PROCESS, t.id))
            os.sched_setaffinity(t.id, {cpu})
            os.setpriority(os.PRIO_PROCESS, t.id, -10)

    def restore(self) -> None:
        for tid, (cpus, nice) in self.saved.items():
            try:
                os.sched_setaffinity(tid, cpus)
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except ProcessLookupError:
                pass


def put_back(server: subprocess.Popen | None, rabbit: PinnedRabbit | None) -> None:
    """The benchmark's own redis-server stopped, RabbitMQ's threads put back."""
    if server is not None:
        server.terminate()
        server.wait(timeout=10)
    if rabbit is not None:
        rabbit.restore()

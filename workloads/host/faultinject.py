"""A fault injected on this host, for the run's own processes only (the host's agent runs it: the
``fault`` command of workloads/host/agent.py, timed by the controller: engine/run/faultrun.py).

- ``kill_child``: SIGKILL one prefork pool child of the run's worker that is running a task (a
  child marks the task it runs in ``busy.<pid>`` in fault cells: workloads/instrument.py); none
  within :data:`~cmx.workloads.faults.BUSY_CHILD_WAIT_S`: the fault fails, saying so.
- ``kill_worker`` / ``term_worker``: SIGKILL / SIGTERM the run's worker's main process; once it
  and its supervisor are gone, after ``restart_s``, a replacement worker of the same node name
  starts consuming the run's queue (as systemd restarts a unit).
- ``restart_broker``: stop and start the run's broker server (Redis or RabbitMQ) on this host, one
  the sweep provisioned or the inventory marks disposable (engine/model/faultcheck.py).
- ``partition_worker@T/D``: this host's traffic to and from the broker's address and port dropped
  for D seconds (a packet filter: nftables, else iptables; a blackhole route where neither exists:
  workloads/host/netcut.py; ``method`` in faults.csv says which), restored after, on every error,
  when the run ends first, and when the agent's lease ends.

Before the blow the agent sends a ``fault`` event (which process, which task, when: this host's
``time.time()``), so the driver knows the worker's exit that follows is the fault's; after it a
``fault_end`` event (its ``error`` when it could not be done). Each fault is also a row of
``faults.csv`` in the run dir, which ingest reads (table ``faults``).
"""
from __future__ import annotations

import csv
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable

import psutil

from cmx.workloads.faults import BUSY_CHILD_WAIT_S, ENDS_WORKER, parse
from cmx.workloads.workerevents import FAULT, FAULT_END, WorkerEvent

FAULTS_CSV = "faults.csv"
HEADER = ("idx", "fault", "kind", "host", "pid", "task_id", "struck_at", "ended_at", "error", "method")
#: Seconds a killed or stopped worker's supervisor may take to end what the worker left (it TERMs
#: the orphans and KILLs them 5 s later).
SUPERVISOR_EXIT_S = 15.0
_csv_lock = threading.Lock()


class FaultFailed(Exception):
    """The fault could not be injected; the message says why, plainly."""


def _pid(run_dir: Path, name: str) -> int | None:
    try:
        return int((run_dir / name).read_text().strip())
    except (OSError, ValueError):
        return None


def _sleep_until(deadline: float, cancelled: Callable[[], bool]) -> None:
    while time.monotonic() < deadline:
        if cancelled():
            raise FaultFailed("the run ended before the fault's time")
        time.sleep(min(0.01, max(deadline - time.monotonic(), 0)))


def busy_child(run_dir: Path, worker: int, wait_s: float, cancelled: Callable[[], bool]) -> tuple[int, str]:
    """(pid, task id) of a pool child of ``worker`` running a task of the run, within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            children = psutil.Process(worker).children()
        except psutil.NoSuchProcess:
            raise FaultFailed(f"the worker (pid {worker}) is gone") from None
        for child in children:
            try:
                task_id = Path(run_dir, f"busy.{child.pid}").read_text().strip()
            except OSError:
                continue
            if task_id:
                return child.pid, task_id
        if time.monotonic() > deadline:
            raise FaultFailed(f"no prefork pool child of the worker (pid {worker}) was running a task of the run "
                              f"within {wait_s:g} s")
        if cancelled():
            raise FaultFailed("the run ended before a pool child ran a task")
        time.sleep(0.01)


def _wait_gone(pid: int | None, timeout: float, cancelled: Callable[[], bool], what: str) -> None:
    if pid is None:
        return
    deadline = time.monotonic() + timeout
    while psutil.pid_exists(pid):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        if cancelled():
            raise FaultFailed(f"the run ended while the {what} (pid {pid}) was still running")
        if time.monotonic() > deadline:
            raise FaultFailed(f"the {what} (pid {pid}) was still running {timeout:g} s after the fault")
        time.sleep(0.02)


def restart_broker(workdir: Path, host: str, service: str, broker_url: str, where: dict) -> int | None:
    """Stop and start the run's broker server on this host, as its role laid it out, through that
    server's module (workloads/servers/: ``restart``) at ``where`` (the Place's fields the
    controller read from the inventory: ``place_of``; no ``dir``: ``<workdir>/<service>``); its pid
    before the restart. Only a server cmx provisioned or one the inventory marks disposable (refused
    at validation otherwise: engine/model/faultcheck.py)."""
    from urllib.parse import urlsplit

    from cmx.workloads.servers import registry as servers
    from cmx.workloads.servers.base import Place, RestartError, read_pid

    url = urlsplit(broker_url)
    place = Place(**{"dir": str(workdir / service), **where, "port": url.port or servers.default_port(url.scheme)})
    pid = read_pid(str(Path(place.dir) / f"{service}.pid"))  # the roles' pid file (roles/<service>)
    try:
        with RESTARTING:
            if CLOSING.is_set():  # the agent's lease end has waited for restarts: none may begin now
                raise FaultFailed(f"the run's {service} was not restarted: the host's agent is stopping")
            servers.get(service).restart(place, RESTART_TIMEOUT_S)
    except RestartError as exc:
        raise FaultFailed(f"the run's {service} did not restart: {exc}") from None
    return pid


#: Seconds a broker restart may take (stopped, then answering again).
RESTART_TIMEOUT_S = 60.0
#: Seconds the longest restart can take in all: a server module's steps are each bounded by a
#: share of RESTART_TIMEOUT_S (stop, wait for the port to close, start, wait for it to answer),
#: and together they may take up to about 2.5 times it.
RESTART_WORST_S = 3 * RESTART_TIMEOUT_S
#: Held while a broker restart is under way on this host. A restart is never cancelled half-way:
#: the agent's lease end (a killed controller) waits for it, so no broker is left stopped.
RESTARTING = threading.Lock()
#: Set by the lease end once it waited: a restart that had not begun by then does not begin.
CLOSING = threading.Event()


def restarts_done(timeout: float = RESTART_WORST_S) -> bool:
    """Wait (bounded) until no broker restart is under way on this host, and let none begin after;
    False when one still is."""
    if not RESTARTING.acquire(timeout=timeout):
        return False
    CLOSING.set()
    RESTARTING.release()
    return True


#: Seconds a failover_broker may take before the fault counts as not injected.
FAILOVER_TIMEOUT_S = 30.0
PARTITION = "partition.json"  # in the run dir while a partition holds: what heal() undoes


def partition(run_dir: Path, broker_url: str, duration_s: float, cancelled: Callable[[], bool],
              on_cut: Callable[[str], None] = lambda method: None) -> tuple[str, str]:
    """Drop this host's traffic to and from the broker's address and port for ``duration_s``
    (workloads/host/netcut.py: a packet filter, else a blackhole route), then restore it, also
    when the run ends first or anything fails; (the address, the method used). Refused on a host
    whose agent runs without SSH (this machine: its network is every helper's) and when the
    broker is this host itself or the controller's SSH comes from it."""
    import json
    import socket
    from urllib.parse import urlsplit

    from cmx.workloads.host import netcut

    if not os.environ.get("SSH_CONNECTION"):
        raise FaultFailed("partition_worker changes the worker host's network: it needs a worker host reached "
                          "over SSH, never the controller's own machine")
    url = urlsplit(broker_url)
    host = url.hostname or ""
    try:
        address = socket.gethostbyname(host)
    except OSError as exc:
        raise FaultFailed(f"cannot resolve the broker's host {host!r}: {exc}") from None
    if address.startswith("127.") or address == os.environ["SSH_CONNECTION"].split()[0]:
        raise FaultFailed(f"the broker ({address}) is this host or the controller's own address: a partition "
                          "from it would cut the cmx agent off, not the worker")
    from cmx.workloads.files import write_atomic

    from cmx.workloads.servers import registry as servers

    port = url.port or servers.default_port(url.scheme)
    method = netcut.method()
    # written first: whatever happens next, heal() (here or at the lease's end) undoes it
    write_atomic(run_dir / PARTITION, json.dumps({"address": address, "port": port, "method": method}))
    try:
        netcut.cut(address, port, run_dir.name, method)
        on_cut(method)
        _sleep_until(time.monotonic() + duration_s, cancelled)
    except netcut.CutFailed as exc:
        raise FaultFailed(str(exc)) from None
    finally:
        heal(run_dir)
    return address, method


def heal(run_dir: Path) -> None:
    """Undo the run's partition on this host, if one holds (the agent's lease end calls it too)."""
    import json

    from cmx.workloads.host import netcut

    path = Path(run_dir) / PARTITION
    try:
        held = json.loads(path.read_text())
        address = held["address"]
    except (OSError, ValueError, KeyError):
        return
    try:
        netcut.undo(address, held.get("method", "route"))
    except netcut.CutFailed as exc:
        raise FaultFailed(str(exc)) from None
    path.unlink(missing_ok=True)


def _record(run_dir: Path, row: dict) -> None:
    path = run_dir / FAULTS_CSV
    with _csv_lock, open(path, "a", newline="") as f:
        w = csv.writer(f)
        if f.tell() == 0:
            w.writerow(HEADER)
        w.writerow([row.get(k, "") if row.get(k) is not None else "" for k in HEADER])


def inject(run_dir: Path, host: str, msg: dict, cancelled: Callable[[], bool],
           send: Callable[[WorkerEvent], None], start_worker: Callable[[], int]) -> dict:
    """Wait ``msg["delay_s"]``, then inject fault ``msg["fault"]`` (its index ``msg["index"]``);
    for kinds that end the worker, call ``start_worker()`` (its exit code) after ``restart_s``.
    Returns {"ok", "error", "at", "pid", "task_id", "ended_at"}; never raises."""
    run_dir = Path(run_dir)
    index, text = int(msg["index"]), str(msg["fault"])
    (fault,) = parse(text)
    row: dict = {"idx": index, "fault": text, "kind": fault.kind, "host": host}
    deadline = time.monotonic() + float(msg.get("delay_s") or 0)
    try:
        _sleep_until(deadline, cancelled)
        worker = _pid(run_dir, "worker.pid")
        if fault.kind == "failover_broker":  # on the driver's host: a client of the set, as the workers are
            from cmx.workloads.servers import redis_sentinel

            row.update(struck_at=time.time())
            send(WorkerEvent(FAULT, host, row["struck_at"], index=index, fault=text))
            try:
                redis_sentinel.failover(os.environ.get("CMX_BROKER_URL", ""), FAILOVER_TIMEOUT_S)
            except RuntimeError as exc:
                raise FaultFailed(str(exc)) from None
        elif fault.kind == "restart_broker":
            row.update(struck_at=time.time())
            send(WorkerEvent(FAULT, host, row["struck_at"], index=index, fault=text))
            row["pid"] = restart_broker(Path(msg["workdir"]), host, str(msg["service"]),
                                        os.environ.get("CMX_BROKER_URL", ""), dict(msg.get("place") or {}))
        elif worker is None:
            raise FaultFailed("no worker of the run runs on this host")
        elif fault.kind == "partition_worker":
            row.update(pid=worker, struck_at=time.time())
            send(WorkerEvent(FAULT, host, row["struck_at"], pid=worker, index=index, fault=text))
            partition(run_dir, os.environ.get("CMX_BROKER_URL", ""), fault.duration_s or 0.0, cancelled,
                      on_cut=lambda method: row.update(method=method))
        elif fault.kind == "kill_child":
            pid, task_id = busy_child(run_dir, worker, BUSY_CHILD_WAIT_S, cancelled)
            row.update(pid=pid, task_id=task_id, struck_at=time.time())
            send(WorkerEvent(FAULT, host, row["struck_at"], pid=pid, index=index, fault=text, task_id=task_id))
            os.kill(pid, signal.SIGKILL)
        elif fault.kind in ENDS_WORKER:
            supervisor = _pid(run_dir, "supervisor.pid")
            row.update(pid=worker, struck_at=time.time())
            send(WorkerEvent(FAULT, host, row["struck_at"], pid=worker, index=index, fault=text))
            os.kill(worker, signal.SIGKILL if fault.kind == "kill_worker" else signal.SIGTERM)
            # A warm shutdown lasts as long as the tasks it waits for: the run's own bound holds it.
            _wait_gone(worker, float(msg.get("shutdown_timeout") or 3600), cancelled, "worker")
            _wait_gone(supervisor, SUPERVISOR_EXIT_S, cancelled, "worker's supervisor")
            _sleep_until(time.monotonic() + float(msg.get("restart_s") or 0), cancelled)
            if start_worker():
                raise FaultFailed("its replacement worker did not start (see begin.log and worker.log)")
        else:
            raise FaultFailed(f"{fault.kind} is not injected on the hosts by this cmx")
        row["ended_at"] = time.time()
        send(WorkerEvent(FAULT_END, host, row["ended_at"], pid=row.get("pid"), index=index, fault=text,
                         task_id=row.get("task_id")))
        ok = True
    except (FaultFailed, OSError, psutil.Error) as exc:
        row.update(error=str(exc) if isinstance(exc, FaultFailed) else f"{type(exc).__name__}: {exc}",
                   ended_at=time.time())
        send(WorkerEvent(FAULT_END, host, row["ended_at"], index=index, fault=text, error=row["error"]))
        ok = False
    _record(run_dir, row)
    return {"ok": ok, **{k: row.get(k) for k in ("error", "struck_at", "pid", "task_id", "ended_at")}}

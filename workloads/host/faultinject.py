"""A fault injected on this host, for the run's own processes only (the host's agent runs it: the
``fault`` command of workloads/host/agent.py, timed by the controller: engine/run/faultrun.py).

What each kind does is its module's ``inject`` (workloads/faults/): this module waits for the
fault's time, then hands the kind an :class:`Injection`, the host's steps it may take (the run's
worker and its busy pool child, a signal, the replacement worker, the broker's restart where the
controller says it lives, a partition of this host from the broker and its undo, a replicated
broker's failover), each bounded and giving up when the run ends first. At the agent's lease end,
:func:`undo` lets every kind undo what it may still hold (a partition).

Before the blow the agent sends a ``fault`` event (which process, which task, when: this host's
``time.time()``), so the driver knows the worker's exit that follows is the fault's; after it a
``fault_end`` event (its ``error`` when it could not be done). Each fault is also a row of
``faults.csv`` in the run dir, which ingest reads (table ``faults``).
"""

from __future__ import annotations

import csv
import os
import threading
import time
from pathlib import Path
from typing import Callable

import psutil

from cmx.workloads.faults import FaultFailed, parse, registry
from cmx.workloads.runtime.workerevents import FAULT, FAULT_END, WorkerEvent

FAULTS_CSV = "faults.csv"
HEADER = ("idx", "fault", "kind", "host", "pid", "task_id", "struck_at", "ended_at", "error", "method")
#: Seconds a killed or stopped worker's supervisor may take to end what the worker left (it TERMs
#: the orphans and KILLs them 5 s later).
SUPERVISOR_EXIT_S = 15.0
_csv_lock = threading.Lock()


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
            raise FaultFailed(
                f"no prefork pool child of the worker (pid {worker}) was running a task of the run within {wait_s:g} s"
            )
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


def restart_server(workdir: Path, host: str, service: str, broker_url: str, where: dict) -> int | None:
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


#: Seconds a broker set's failover may take before the fault counts as not injected.
FAILOVER_TIMEOUT_S = 30.0
PARTITION = "partition.json"  # in the run dir while a partition holds: what heal() undoes


def partition(
    run_dir: Path,
    broker_url: str,
    duration_s: float,
    cancelled: Callable[[], bool],
    on_cut: Callable[[str], None] = lambda method: None,
    what: str = "a partition",
) -> tuple[str, str]:
    """Drop this host's traffic to and from the broker's address and port for ``duration_s``
    (workloads/host/netcut.py: a packet filter, else a blackhole route), then restore it, also
    when the run ends first or anything fails; (the address, the method used). Refused on a host
    whose agent runs without SSH (this machine: its network is every helper's) and when the
    broker is this host itself or the controller's SSH comes from it (``what``: the fault's name
    in that refusal)."""
    import json
    import socket
    from urllib.parse import urlsplit

    from cmx.workloads.host import netcut

    if not os.environ.get("SSH_CONNECTION"):
        raise FaultFailed(
            f"{what} changes the worker host's network: it needs a worker host reached "
            "over SSH, never the controller's own machine"
        )
    url = urlsplit(broker_url)
    host = url.hostname or ""
    try:
        address = socket.gethostbyname(host)
    except OSError as exc:
        raise FaultFailed(f"cannot resolve the broker's host {host!r}: {exc}") from None
    if address.startswith("127.") or address == os.environ["SSH_CONNECTION"].split()[0]:
        raise FaultFailed(
            f"the broker ({address}) is this host or the controller's own address: a partition "
            "from it would cut the cmx agent off, not the worker"
        )
    from cmx.workloads.runtime.files import write_atomic

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


class Injection:
    """The steps a fault kind's ``inject`` takes on this host (workloads/faults/base.py's
    ``Injection``), for the run in ``run_dir``; ``row`` is the fault's ``faults.csv`` row."""

    def __init__(
        self,
        run_dir: Path,
        host: str,
        msg: dict,
        cancelled: Callable[[], bool],
        send: Callable[[WorkerEvent], None],
        start_worker: Callable[[], int],
        row: dict,
    ):
        self.run_dir, self.host, self.msg, self.cancelled = run_dir, host, msg, cancelled
        self.send, self._start_worker, self.row = send, start_worker, row
        self.shutdown_timeout = float(msg.get("shutdown_timeout") or 3600)
        self.restart_s = float(msg.get("restart_s") or 0)

    def worker(self) -> int:
        pid = _pid(self.run_dir, "worker.pid")
        if pid is None:
            raise FaultFailed("no worker of the run runs on this host")
        return pid

    def supervisor(self) -> int | None:
        return _pid(self.run_dir, "supervisor.pid")

    def strike(self, pid: int | None = None, task_id: str | None = None) -> None:
        self.row.update(
            struck_at=time.time(),
            **({"pid": pid} if pid is not None else {}),
            **({"task_id": task_id} if task_id is not None else {}),
        )
        self.send(
            WorkerEvent(
                FAULT,
                self.host,
                self.row["struck_at"],
                pid=pid,
                index=self.row["idx"],
                fault=self.row["fault"],
                task_id=task_id,
            )
        )

    def note(self, **fields) -> None:
        self.row.update(fields)

    def busy_child(self, worker: int, wait_s: float) -> tuple[int, str]:
        return busy_child(self.run_dir, worker, wait_s, self.cancelled)

    def wait_gone(self, pid: int | None, timeout: float, what: str) -> None:
        _wait_gone(pid, timeout, self.cancelled, what)

    def wait_supervisor(self, pid: int | None) -> None:
        _wait_gone(pid, SUPERVISOR_EXIT_S, self.cancelled, "worker's supervisor")

    def sleep(self, seconds: float) -> None:
        _sleep_until(time.monotonic() + seconds, self.cancelled)

    def start_worker(self) -> int:
        return self._start_worker()

    def restart_server(self) -> int | None:
        return restart_server(
            Path(self.msg["workdir"]),
            self.host,
            str(self.msg["service"]),
            os.environ.get("CMX_BROKER_URL", ""),
            dict(self.msg.get("place") or {}),
        )

    def partition(self, duration_s: float, what: str) -> str:
        return partition(
            self.run_dir,
            os.environ.get("CMX_BROKER_URL", ""),
            duration_s,
            self.cancelled,
            on_cut=lambda method: self.row.update(method=method),
            what=what,
        )[1]

    def heal(self) -> None:
        heal(self.run_dir)

    def kill_node(self) -> int:
        from cmx.workloads.servers import registry as servers
        from cmx.workloads.servers.base import RestartError

        node, service = dict(self.msg.get("node") or {}), str(self.msg.get("service"))
        try:
            with RESTARTING:  # the agent's lease end lets it finish: no node is left down
                if CLOSING.is_set():
                    raise FaultFailed(f"node {node.get('name')} was not killed: the host's agent is stopping")
                return servers.get(service).kill_node(
                    node, os.environ.get("CMX_BROKER_URL", ""), self.restart_s, RESTART_TIMEOUT_S
                )
        except RestartError as exc:
            raise FaultFailed(f"node {node.get('name')} of the run's cluster: {exc}") from None

    def failover(self) -> None:
        from urllib.parse import urlsplit

        from cmx.workloads.servers import registry as servers

        url = os.environ.get("CMX_BROKER_URL", "")
        try:
            servers.of_scheme(urlsplit(url).scheme).fail_over(url, FAILOVER_TIMEOUT_S)
        except RuntimeError as exc:
            raise FaultFailed(str(exc)) from None


def inject(
    run_dir: Path,
    host: str,
    msg: dict,
    cancelled: Callable[[], bool],
    send: Callable[[WorkerEvent], None],
    start_worker: Callable[[], int],
) -> dict:
    """Wait ``msg["delay_s"]``, then inject fault ``msg["fault"]`` (its index ``msg["index"]``)
    through its kind's ``inject``; a kind that ends the worker calls ``start_worker()`` (its exit
    code) after ``restart_s``. Returns {"ok", "error", "at", "pid", "task_id", "ended_at"}; never
    raises."""
    run_dir = Path(run_dir)
    index, text = int(msg["index"]), str(msg["fault"])
    (fault,) = parse(text)
    row: dict = {"idx": index, "fault": text, "kind": fault.kind, "host": host}
    deadline = time.monotonic() + float(msg.get("delay_s") or 0)
    try:
        _sleep_until(deadline, cancelled)
        fault.definition.inject(fault, Injection(run_dir, host, msg, cancelled, send, start_worker, row))
        row["ended_at"] = time.time()
        send(
            WorkerEvent(
                FAULT_END,
                host,
                row["ended_at"],
                pid=row.get("pid"),
                index=index,
                fault=text,
                task_id=row.get("task_id"),
            )
        )
        ok = True
    except (FaultFailed, OSError, psutil.Error) as exc:
        row.update(
            error=str(exc) if isinstance(exc, FaultFailed) else f"{type(exc).__name__}: {exc}", ended_at=time.time()
        )
        send(WorkerEvent(FAULT_END, host, row["ended_at"], index=index, fault=text, error=row["error"]))
        ok = False
    _record(run_dir, row)
    return {"ok": ok, **{k: row.get(k) for k in ("error", "struck_at", "pid", "task_id", "ended_at")}}


def undo(run_dir: Path) -> None:
    """Let every fault kind undo what it may still hold on this host for the run in ``run_dir``
    (the agent's lease end: a partition's cut). Raises FaultFailed when one could not."""
    steps = Injection(Path(run_dir), "", {}, lambda: True, lambda event: None, lambda: 1, {})
    for kind in registry.KINDS.values():
        kind.undo(steps)

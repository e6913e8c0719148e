"""The driver's view of the run's workers: they run what the cell asks, they all consume before
the workload is released, and none dies unnoticed while the driver waits.

Control replies are checked one node at a time: a broadcast that one worker missed (or answered
late) must not let the run go on with fewer workers than ``machines`` says. What a worker cannot
answer itself (it is busy in a task on a one-thread pool, or dead) comes from its host instead:
the worker events (workloads/runtime/workerevents.py) its host's agent saw and the controller passed on.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

from celery import Celery

from cmx.workloads.drive.cellconfig import broker_mismatch, mismatches, wanted_config
from cmx.workloads.vocab import kinds
from cmx.workloads.servers import registry as servers
from cmx.workloads.faults import parse as parse_faults
from cmx.workloads.runtime.instrument import WAKE_TASK
from cmx.workloads.runtime.spec import RunSpec, node_name, worker_client_name
from cmx.workloads.vocab.pools import SILENT_WHEN_BUSY
from cmx.workloads.runtime.workerevents import CONSUMING, EXITED, FAULT, FAULT_END, WorkerEvent, merge, observe, read

#: A worker that answers no control message for this long is gone (killed, crashed, host down).
LOST_AFTER_S = 10.0
#: How often the watchdog looks for a worker's end its host reported (a file read).
EVENTS_EVERY_S = 0.2


class WorkerProblem(Exception):
    """A worker of the run does not do what the run needs; ``hosts`` are the inventory names.
    ``silent``: it does not answer at all (dead, hung, or its host is gone)."""

    def __init__(self, message: str, hosts: list[str], silent: bool = True):
        super().__init__(message)
        self.hosts = hosts
        self.silent = silent


def host_of(node: str) -> str:
    return node.split("@", 1)[1]


def _no_events() -> list[WorkerEvent]:
    return []


def reported(run_dir, host: str) -> list[WorkerEvent]:
    """The worker events the driver knows of: those the controller passed on (other hosts'), and
    what this host's own worker of the run shows in the run dir they share."""
    return merge(read(run_dir), observe(run_dir, host))


def check_alive(spec: RunSpec, events: list[WorkerEvent]) -> None:
    """Raise :class:`WorkerProblem` naming how each ended when a worker of the run has exited
    (a fault's own blow excepted: its host named the process before it struck), or a fault of
    the run could not be injected."""
    failed = [e for e in events if e.kind == FAULT_END and e.error]
    if failed:
        raise WorkerProblem(
            "; ".join(f"fault {e.fault} on {e.host} could not be injected: {e.error}" for e in failed),
            [e.host for e in failed],
            silent=False,
        )
    nodes = set(spec.worker_nodes)
    struck = {(e.host, e.pid) for e in events if e.kind == FAULT}
    # From the strike of a fault that may end the workers themselves (``downs_workers``), an exit is
    # its finding (the tasks counted lost once the run settles), not a harness failure.
    downed = min((e.at for e in events if e.kind == FAULT and _downs_workers(e.fault)), default=None)
    dead = [
        e
        for e in events
        if e.kind == EXITED
        and node_name(spec.run_id, e.host) in nodes
        and (e.host, e.pid) not in struck
        and (downed is None or e.at < downed)
    ]
    if dead:
        raise WorkerProblem("; ".join(f"{e.text()} (pid {e.pid})" for e in dead), [e.host for e in dead], silent=False)


def _downs_workers(text: str | None) -> bool:
    try:
        return bool(text) and any(f.definition.downs_workers for f in parse_faults(text))
    except ValueError:
        return False


def _replies(replies: list[dict] | None) -> dict[str, Any]:
    """{node: answer} from a broadcast's list of {node: answer}."""
    return {node: answer for reply in replies or [] for node, answer in reply.items()}


# -- what the cell asks vs what the worker runs (the comparison: workloads/drive/cellconfig.py) ---
def worker_configs(app: Celery, spec: RunSpec, timeout_s: float, events=_no_events) -> dict[str, dict]:
    """Every worker's effective configuration, {node: config}; a worker that does not answer fails."""
    want = set(spec.worker_nodes)
    got: dict[str, dict] = {}
    limit = time.monotonic() + timeout_s
    while want - set(got):
        check_alive(spec, events())
        missing = sorted(want - set(got))
        got |= {
            n: c
            for n, c in _replies(
                app.control.broadcast(
                    "cmx_config",
                    arguments={"settings": sorted(spec.celery)},
                    destination=missing,
                    reply=True,
                    timeout=2.0,
                    limit=len(missing),
                )
            ).items()
            if isinstance(c, dict) and "pool" in c
        }
        if want - set(got) and time.monotonic() > limit:
            missing = sorted(want - set(got))
            raise WorkerProblem(
                "worker(s) did not report their configuration within "
                f"{timeout_s:g}s: " + ", ".join(f"{n} on host {host_of(n)}" for n in missing),
                [host_of(n) for n in missing],
            )
    return got


def check_configs(spec: RunSpec, configs: dict[str, dict]) -> None:
    """Fail with both values when a worker runs something other than the cell asks."""
    want = wanted_config(spec)
    bad = {
        node: m
        for node, config in sorted(configs.items())
        if (m := mismatches(want, config) + broker_mismatch(spec, config))
    }
    if bad:
        raise WorkerProblem(
            "the worker does not run what the cell asks: "
            + "; ".join(f"{node} on host {host_of(node)}: " + ", ".join(m) for node, m in bad.items()),
            [host_of(n) for n in bad],
            silent=False,
        )


# -- every worker consumes before the workload is released ----------------------------------------
def consuming(app: Celery, nodes: list[str], queue: str) -> set[str]:
    """The nodes that say they consume ``queue`` now (``active_queues``, answered per node)."""
    answers = _replies(
        app.control.broadcast("active_queues", destination=nodes, reply=True, timeout=1.0, limit=len(nodes))
    )
    return {
        n for n, queues in answers.items() if isinstance(queues, list) and any(q.get("name") == queue for q in queues)
    }


def start_consuming(app: Celery, spec: RunSpec, timeout_s: float, events=_no_events) -> float:
    """Tell every worker to consume the run's queue and wait until each one confirms it does.

    ``add_consumer`` answers "ok" before the worker has added the queue (Celery schedules it on
    the worker's loop; gevent and eventlet run it only once their wait for a message on the hold
    queue returns, up to 2 s later unless :func:`wake` sends one), so its replies prove nothing:
    each worker is asked for its ``active_queues`` until the run's queue is in it, and asked to
    add the queue again when a round passes without it. A worker that already took a task of the
    run consumes too, whether or not it can answer: a solo worker runs its first task (which may
    last longer than this wait) as soon as it adds the queue, and answers nothing meanwhile; its
    host's word of that first receipt (``events()``, kind ``consuming``) confirms it. A worker
    that exits fails the wait at once (``events()``, kind ``exited``).
    Returns when all consume (``time.time()``): the workload's clock starts there."""
    want, confirmed = set(spec.worker_nodes), set()
    limit = time.monotonic() + timeout_s
    asked: dict[str, float] = {}
    while confirmed != want:
        seen = events()
        check_alive(spec, seen)
        confirmed |= want & {node_name(spec.run_id, e.host) for e in seen if e.kind == CONSUMING}
        if confirmed == want:
            break
        now = time.monotonic()
        again = sorted(n for n in want - confirmed if now - asked.get(n, -1e9) > 3.0)
        if again:
            app.control.add_consumer(spec.queue, destination=again, reply=True, timeout=1.0)
            wake(app, spec, len(again))
            asked |= {n: now for n in again}
        confirmed |= consuming(app, sorted(want - confirmed), spec.queue)
        if confirmed != want and time.monotonic() > limit:
            missing = sorted(want - confirmed)
            raise WorkerProblem(
                f"worker(s) never confirmed consuming the run's queue within {timeout_s:g}s: "
                + ", ".join(f"{n} on host {host_of(n)}" for n in missing),
                [host_of(n) for n in missing],
            )
        if confirmed != want:
            time.sleep(0.05)
    wake_blocked(app, spec)
    return time.time()


def wake(app: Celery, spec: RunSpec, workers: int) -> None:
    """One harness task (``instrument.WAKE_TASK``: not stamped, not counted) per worker to the hold
    queue. A gevent or eventlet worker takes control commands on a connection of their own and
    runs the ``add_consumer`` it scheduled only when its consumer's ``drain_events`` (a 2 s
    timeout) returns; a message on the queue it waits on ends that wait at once. Without it a
    green pool's backlog waited ~1.9 s longer than prefork's or threads', in queue wait and in
    harness seconds. Harmless to the other pools (they add the queue at once)."""
    with app.producer_or_acquire() as producer:
        for _ in range(workers):
            app.send_task(WAKE_TASK, queue=spec.hold_queue, ignore_result=True, producer=producer)


def wake_blocked(app: Celery, spec: RunSpec) -> int:
    """End the blocking reads the run's workers have in flight on the broker, where the broker's
    client blocks in one (Redis's BRPOP): once they consume (here), and when they are told to
    stop (workloads/app/workerstop.py). How many were woken; 0 where nothing blocks (each server's
    ``wake_consumers``, workloads/servers/)."""
    return servers.get(kinds.BROKERS[spec.broker].service).wake_consumers(app, worker_client_name(spec.run_id))


def cut_off(spec: RunSpec, events: list[WorkerEvent]) -> set[str]:
    """Worker nodes a fault of the run has cut off from the broker (a kind that ``cuts_off``:
    workloads/faults/): from its strike on, their silence is what the fault does to Celery
    (measured: a stall, tasks lost when the run settles), not a worker lost; a worker that exits
    its host still reports (:func:`check_alive`)."""
    nodes: set[str] = set()
    for e in events:
        if e.kind != FAULT or not e.fault:
            continue
        try:
            struck = parse_faults(e.fault)
        except ValueError:
            continue
        for fault in struck:
            if fault.definition.cuts_off:
                nodes |= {node_name(spec.run_id, e.host)} if fault.target == "worker" else set(spec.worker_nodes)
    return nodes


# -- a dead worker is noticed within seconds -------------------------------------------------------
class Watchdog:
    """Fails the run (the driver's main thread gets SIGUSR1, which raises :class:`WorkerProblem`)
    as soon as a worker of the run has exited (``events()``, looked at every
    :data:`EVENTS_EVERY_S`: its host's supervisor says so whatever its pool was doing), and, once
    :meth:`watch_silence` was called (the workers consume), when a worker answers nothing for
    :data:`LOST_AFTER_S` (its host down, the agent gone). A solo worker answers no control
    message while it runs a task, nor does a gevent or eventlet worker while a task blocks its
    event loop (CPU, an unpatched call: experiments/pitfalls/gevent-heartbeat.yaml), so their
    silence counts only before they took a task of the run, and never while their last answer
    showed them busy: once they work, their host's word of their end tells a dead one from a
    busy one, and the run's timeout bounds a hung one."""

    def __init__(self, app: Celery, spec: RunSpec, events=_no_events, lost_after_s: float = LOST_AFTER_S):
        self.app, self.spec, self.events, self.lost_after_s = app, spec, events, lost_after_s
        self.problem: WorkerProblem | None = None
        self._stop = threading.Event()
        self._silence = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="cmx-watchdog", daemon=True)
        self._armed = False

    def __enter__(self) -> "Watchdog":
        # Signals reach only the main thread; from another one, check_deadline() still raises.
        self._armed = threading.current_thread() is threading.main_thread()
        if self._armed:
            signal.signal(signal.SIGUSR1, self._on_signal)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._armed = False
        self._stop.set()
        self._thread.join(timeout=5)

    def watch_silence(self) -> None:
        self._silence.set()

    def _on_signal(self, signum, frame) -> None:
        if self._armed and self.problem is not None:
            self._armed = False
            raise self.problem

    def _fail(self, problem: WorkerProblem) -> None:
        self.problem = problem
        if self._armed:
            os.kill(os.getpid(), signal.SIGUSR1)

    def _watch(self) -> None:
        nodes = list(self.spec.worker_nodes)
        seen: dict[str, float] = {}
        busy = {n: False for n in nodes}
        restarted: set[tuple] = set()
        asked = 0.0
        while not self._stop.wait(EVENTS_EVERY_S):
            events = self.events()
            try:
                check_alive(self.spec, events)
            except WorkerProblem as problem:
                return self._fail(problem)
            if not self._silence.is_set() or time.monotonic() - asked < 1.0:
                continue
            asked = time.monotonic()
            seen = seen or {n: asked for n in nodes}
            # Once its host says it took a task of the run, a one-thread or green worker's silence
            # is its work: between two long tasks it may answer "idle" and fall silent again for
            # as long as the next one lasts (a solo worker confirmed at the start barrier from its
            # first receipt may not answer at all). Its death its host reports (check_alive).
            took = {node_name(self.spec.run_id, e.host) for e in events if e.kind == CONSUMING}
            try:
                answers = _replies(
                    self.app.control.broadcast(
                        "cmx_progress", destination=nodes, reply=True, timeout=1.0, limit=len(nodes)
                    )
                )
            except Exception:  # the broker itself: the driver's own calls will say so
                continue
            now = time.monotonic()
            for node, answer in answers.items():
                if node in seen:
                    seen[node] = now
                    busy[node] = isinstance(answer, dict) and answer.get("active", 0) > 0
            # A worker a fault ended answers nothing until its replacement is ready (a warm shutdown
            # lasts as long as its tasks); from its end it has the usual time to answer again.
            ended = {(e.host, e.index) for e in events if e.kind == FAULT_END}
            down = {
                node_name(self.spec.run_id, e.host)
                for e in events
                if e.kind == FAULT and (e.host, e.index) not in ended
            }
            for e in events:
                if e.kind == FAULT_END and (e.host, e.index) not in restarted:
                    restarted.add((e.host, e.index))
                    if node_name(self.spec.run_id, e.host) in seen:
                        seen[node_name(self.spec.run_id, e.host)] = now
            quiet = cut_off(self.spec, events)
            lost = [
                n
                for n in nodes
                if now - seen[n] > self.lost_after_s
                and n not in down
                and n not in quiet
                and not (self.spec.pool in SILENT_WHEN_BUSY and (busy[n] or n in took))
            ]
            if lost:
                return self._fail(
                    WorkerProblem(
                        "; ".join(
                            f"worker {n} on host {host_of(n)} stopped answering for {now - seen[n]:.0f}s" for n in lost
                        ),
                        [host_of(n) for n in lost],
                    )
                )

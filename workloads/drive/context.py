"""What a workload's ``drive`` gets: the run's app and spec, and its coordination steps.

The contract between the driver (workloads/app/driver.py, which builds it) and the workloads
(workloads/catalog/, the user's own): it needs nothing of the app factory, so a workload can use
it without importing the driver.
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from celery import Celery
from kombu import Queue

from cmx.workloads.vocab import kinds
from cmx.workloads.drive import DriveTimeout, TasksLost, connection_errors
from cmx.workloads.drive import drivers
from cmx.workloads.drive.workerwatch import (
    Watchdog,
    check_alive,
    check_configs,
    reported,
    start_consuming,
    worker_configs,
)
from cmx.workloads.runtime.files import write_atomic
from cmx.workloads.servers import registry as servers
from cmx.workloads.runtime.spec import RunSpec


#: The shortest wait between two progress checks of :meth:`DriveContext.wait_completed`.
MIN_POLL_S = 0.05


@dataclass
class DriveContext:
    """What a workload's ``drive`` gets: the app, the spec, and the run's coordination steps."""

    app: Celery
    spec: RunSpec
    run_dir: Path
    host: str
    deadline: float  # time.monotonic() after which the run has timed out
    metrics: list[tuple[str, float, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: (ts, messages waiting in the run queue), taken while waiting for tasks to finish.
    queue_samples: list[tuple[float, int]] = field(default_factory=list)
    #: time.time() when every worker confirmed it consumes the run's queue (the workload's clock).
    consuming_at: float | None = None
    watchdog: Watchdog | None = None
    #: The run's marks given so far (workloads/runtime/runmarks.py).
    marked: set[str] = field(default_factory=set)
    #: Ids of the tasks this driver published that the broker returned unroutable (in no queue):
    #: :meth:`wait_completed` waits for the others only, then fails the run naming them.
    returned: list[str] = field(default_factory=list)

    # -- several drivers (the ``drivers`` dimension: workloads/drive/drivers.py) --------------
    @property
    def leads(self) -> bool:
        """This driver checks the workers and starts the clock (the only one, or the first)."""
        return drivers.index_of(self.spec, self.host) == 0

    def share(self, total: int) -> int:
        """This driver's part of ``total`` tasks (all of them when it drives alone)."""
        return drivers.share(total, drivers.index_of(self.spec, self.host), drivers.count(self.spec))

    def share_rate(self, rate: float) -> float:
        """This driver's part of a stream's ``rate`` (tasks/s over the whole run)."""
        return rate / drivers.count(self.spec)

    def worker_events(self) -> list:
        """What the workers' hosts said of them so far (workloads/runtime/workerevents.py)."""
        return reported(self.run_dir, self.host)

    def _watch(self) -> Watchdog:
        """The run's watchdog, started once: from then on a worker's exit fails the run."""
        if self.watchdog is None:
            self.watchdog = Watchdog(self.app, self.spec, self.worker_events).__enter__()
        return self.watchdog

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def check_deadline(self, what: str) -> None:
        if self.watchdog is not None and self.watchdog.problem is not None:
            raise self.watchdog.problem
        if self.remaining() <= 0:
            raise DriveTimeout(f"run_timeout of {self.spec.run_timeout_s:g}s passed while {what}")

    def metric(self, name: str, value: float, unit: str = "") -> None:
        """Report a workload-specific figure; it lands in the ``metrics`` table."""
        self.metrics.append((name, float(value), unit))

    def declare_queues(self) -> None:
        """Declare the run's queues so nothing published before a consumer exists is dropped."""
        qargs = self.spec.queue_arguments()
        with self.app.connection_for_write() as conn:
            for name in (self.spec.queue, self.spec.hold_queue, *self.spec.workload_queues):
                Queue(name, queue_arguments=qargs).bind(conn.default_channel).declare()

    def wait_for_workers(self) -> None:
        """Block until every worker node of the run answers a ping, then check that each runs
        what the cell asks (its own report, stored as worker_config.json). Only the leading
        driver does: the others publish when it says so."""
        if not self.leads:
            return
        self._watch()
        want = set(self.spec.worker_nodes)
        limit = min(self.deadline, time.monotonic() + self.spec.worker_start_timeout_s)
        seen: set[str] = set()
        while True:
            check_alive(self.spec, self.worker_events())
            for reply in self.app.control.ping(destination=sorted(want), timeout=0.5) or []:
                seen.update(reply)
            if want <= seen:
                break
            if time.monotonic() > limit:
                missing = ", ".join(sorted(want - seen))
                raise RuntimeError(
                    f"workers did not answer within {self.spec.worker_start_timeout_s:g}s: {missing} "
                    "(see worker.log in the run's artifacts)"
                )
        configs = worker_configs(
            self.app, self.spec, timeout_s=max(5.0, min(30.0, self.remaining())), events=self.worker_events
        )
        write_atomic(self.run_dir / "worker_config.json", json.dumps(configs, indent=2, sort_keys=True))
        check_configs(self.spec, configs)

    def start_consuming(self) -> None:
        """Tell every worker to consume the run's queue (they start on an empty hold queue) and
        return once each has confirmed it does; from then on a silent worker fails the run too.
        With several drivers, the leader first waits until every other driver is ready and then
        tells them the clock started; the others wait for that word here."""
        until = time.monotonic() + max(1.0, self.remaining())
        if not self.leads:
            self.consuming_at = drivers.meet(self.app, self.spec, self.host, until, self.check_deadline)
            self.mark("clock")
            return
        watchdog = self._watch()
        if drivers.count(self.spec) > 1:
            drivers.gather(self.app, self.spec, until, self.check_deadline)
        limit = max(1.0, min(self.spec.worker_start_timeout_s, self.remaining()))
        self.consuming_at = start_consuming(self.app, self.spec, timeout_s=limit, events=self.worker_events)
        if drivers.count(self.spec) > 1:
            drivers.release(self.app, self.spec, self.consuming_at)
        watchdog.watch_silence()
        self.mark("clock")

    def mark(self, name: str) -> None:
        """Mark ``clock`` (the workload's clock started) or ``drain`` (its work is done) on every
        host of the run: each host's sampler reads PSS of every process it watches then, so a peak
        PSS comes from inside the run (workloads/runtime/runmarks.py). ``clock`` asks without waiting
        (nothing of the workload waits for it); ``drain`` waits until the readings are in (a few
        seconds at most), before the run's processes are stopped."""
        from cmx.workloads.runtime.runmarks import mark

        if name in self.marked:
            return
        self.marked.add(name)
        wait = name == "drain"
        mark(self.run_dir, name)  # the driver's host (its sampler watches the driver, a broker...)
        if not self.leads:  # the leader marks the workers
            return
        # The broker may have closed the pool's connection under us (a restarted broker, a Sentinel
        # turning the old master into a replica kills its clients ~10 s after a failover): once
        # more on a fresh one. A mark that cannot be sent costs the workers' peak PSS (not
        # sampled: NULL, and said in the run's notes), not the run.
        for fresh in (False, True):
            try:
                with self.app.connection_for_write() if fresh else nullcontext() as conn:
                    self.app.control.broadcast(
                        "cmx_mark",
                        arguments={"name": name},
                        connection=conn,
                        destination=self.spec.worker_nodes,
                        reply=wait,
                        timeout=3.0,
                        limit=len(self.spec.worker_nodes),
                    )
                break
            except connection_errors() as exc:
                if fresh:
                    self.notes.append(
                        f"the {name} mark did not reach the workers ({type(exc).__name__}: "
                        f"{exc}): their peak PSS is not sampled"
                    )
        if wait:
            mark(self.run_dir, name, wait_s=2.0)

    def completed(self) -> int:
        """Tasks finished so far over all workers of the run, as counted by Celery itself."""
        return self.progress()[0]

    def progress(self) -> tuple[int, int, int]:
        """(tasks finished, tasks held: received and not finished, workers that answered) over
        the run's workers, as Celery counts them (``cmx_progress``)."""
        replies = (
            self.app.control.broadcast(
                "cmx_progress",
                destination=self.spec.worker_nodes,
                reply=True,
                timeout=2.0,
                limit=len(self.spec.worker_nodes),
            )
            or []
        )
        counts = [r for reply in replies for r in reply.values() if isinstance(r, dict)]
        # A worker of an older cmx says nothing of what it holds: never "nothing held".
        return (sum(r["completed"] for r in counts), sum(r.get("held", 1) for r in counts), len(counts))

    def queue_depth(self, conn) -> int | None:
        """Messages waiting in the run's queue now (not counting those prefetched by workers)."""
        try:
            return servers.get(kinds.BROKERS[self.spec.broker].service).queue_depth(conn, self.spec.queue)
        except Exception:  # a depth sample is worth less than the run
            return None

    def wait_completed(self, n: int, poll_s: float = 0.2) -> None:
        """Block until ``n`` tasks have finished over all workers, or the run times out; samples
        the queue depth on the way (queue.csv). Another driver than the leader returns at once:
        the leader waits for every driver's tasks (``n`` is the run's whole count). A fault run
        instead ends once its faults are over and ``limits.settle`` passed without a task
        finishing (workloads/drive/settle.py). Tasks lost before the queue end the wait at once,
        failing the run with :class:`TasksLost` (workloads/drive/lost.py): those the broker returned
        (:attr:`returned`) once the others finished; any still missing once the queue is empty, no
        worker holds one and none finished for a while."""
        if not self.leads:
            return
        if self.spec.faults:
            from cmx.workloads.drive.settle import wait_settled

            return wait_settled(self, poll_s)
        # One connection for every depth sample: a new one per poll would churn the broker's
        # connections (5 a second) and show up in the connection counts we measure.
        # The depth is sampled before each progress check: a backlog's first sample must not
        # wait for the workers' replies, by when a fast broker may have drained it.
        # The wait ends at the first check after the last task: a check every ``poll_s`` let a run
        # end up to ``poll_s`` late, so once the rate seen says the end is nearer, the next check
        # is when it should come (not sooner than MIN_POLL_S: each check is a broadcast).
        from cmx.workloads.drive.lost import Vanished

        # Not where Celery delays countdown/ETA tasks in RabbitMQ's delayed-delivery queues (a quorum
        # queue behind an exchange that is not direct: Celery's own test in Celery.send_task), in no run
        # queue and no worker's hands, where a countdown over LOST_AFTER_S would read as lost. The run's
        # own queues are direct, so their ETA tasks wait in the worker's hands (counted as held); a user's
        # workload may route its worker's queues otherwise.
        delayed = kinds.queue_type_of(self.spec.broker, self.spec.queue_type) == "quorum" and any(
            q.exchange is not None and q.exchange.type != "direct" for q in self.app.amqp.queues.values()
        )
        vanished = Vanished(len(self.spec.worker_nodes), alone=drivers.count(self.spec) == 1 and not delayed)
        with self.app.connection_for_read() as conn:
            first = None
            while True:
                depth = self.queue_depth(conn)
                if depth is not None:
                    self.queue_samples.append((time.time(), depth))
                (done, held, answered), now = self.progress(), time.monotonic()
                if done >= n - len(self.returned):
                    if self.returned:
                        raise TasksLost(
                            len(self.returned),
                            n,
                            "the broker returned them unroutable (basic.return): no queue took them",
                        )
                    return
                self.check_deadline(f"waiting for {n} tasks to finish")
                why = vanished.check(now, done, held, answered, depth)
                if why:
                    raise TasksLost(n - done, n, why)
                first = first or (now, done)
                rate = (done - first[1]) / (now - first[0]) if now > first[0] else 0.0
                time.sleep(min(poll_s, max(MIN_POLL_S, (n - done) / rate)) if rate > 0 else poll_s)

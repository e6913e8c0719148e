"""The driver: the process on a ``drivers`` host that runs one workload for one run.

``python -m cmx.workloads.drive.driver`` (with ``CMX_RUN_DIR``, ``CMX_HOST`` and the broker/backend URLs in
the environment) loads the run spec, waits for every worker of the run, hands control to the
workload's ``drive``, and writes ``driver.json`` (status, error, timings, broker version, metrics
the workload reported). It never raises past ``main``: what went wrong is in ``driver.json``.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from celery import Celery
from kombu import Queue

from cmx.workloads.catalog import registry
from cmx.workloads.app import create_app, queue_arguments
from cmx.workloads.files import write_atomic
from cmx.workloads.instrument import recorder
from cmx.workloads.spec import RunSpec, host_from_env, run_dir_from_env
from cmx.workloads.drive.workerwatch import Watchdog, WorkerProblem, check_configs, start_consuming, worker_configs


class DriveTimeout(Exception):
    """The run passed ``limits.run_timeout``."""


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
        qargs = queue_arguments(self.spec)
        with self.app.connection_for_write() as conn:
            for name in (self.spec.queue, self.spec.hold_queue):
                Queue(name, queue_arguments=qargs).bind(conn.default_channel).declare()

    def wait_for_workers(self) -> None:
        """Block until every worker node of the run answers a ping, then check that each runs
        what the cell asks (its own report, stored as worker_config.json)."""
        want = set(self.spec.worker_nodes)
        limit = min(self.deadline, time.monotonic() + self.spec.worker_start_timeout_s)
        seen: set[str] = set()
        while True:
            for reply in self.app.control.ping(destination=sorted(want), timeout=0.5) or []:
                seen.update(reply)
            if want <= seen:
                break
            if time.monotonic() > limit:
                missing = ", ".join(sorted(want - seen))
                raise RuntimeError(f"workers did not answer within {self.spec.worker_start_timeout_s:g}s: {missing} "
                                   "(see worker.log in the run's artifacts)")
        configs = worker_configs(self.app, self.spec, timeout_s=max(5.0, min(30.0, self.remaining())))
        write_atomic(self.run_dir / "worker_config.json", json.dumps(configs, indent=2, sort_keys=True))
        check_configs(self.spec, configs)

    def start_consuming(self) -> None:
        """Tell every worker to consume the run's queue (they start on an empty hold queue) and
        return once each has confirmed it does; from then on a dead worker fails the run."""
        limit = max(1.0, min(self.spec.worker_start_timeout_s, self.remaining()))
        self.consuming_at = start_consuming(self.app, self.spec, timeout_s=limit)
        if self.watchdog is None:
            self.watchdog = Watchdog(self.app, self.spec).__enter__()

    def completed(self) -> int:
        """Tasks finished so far over all workers of the run, as counted by Celery itself."""
        replies = self.app.control.broadcast("cmx_progress", destination=self.spec.worker_nodes, reply=True,
                                             timeout=2.0, limit=len(self.spec.worker_nodes)) or []
        return sum(r["completed"] for reply in replies for r in reply.values() if isinstance(r, dict))

    def queue_depth(self, conn) -> int | None:
        """Messages waiting in the run's queue now (not counting those prefetched by workers)."""
        try:
            return conn.default_channel.queue_declare(self.spec.queue, passive=True).message_count
        except Exception:  # a depth sample is worth less than the run
            return None

    def wait_completed(self, n: int, poll_s: float = 0.2) -> None:
        """Block until ``n`` tasks have finished over all workers, or the run times out; samples
        the queue depth on the way (queue.csv)."""
        # One connection for every depth sample: a new one per poll would churn the broker's
        # connections (5 a second) and show up in the connection counts we measure.
        # The depth is sampled before each progress check: a backlog's first sample must not
        # wait for the workers' replies, by when a fast broker may have drained it.
        with self.app.connection_for_read() as conn:
            while True:
                depth = self.queue_depth(conn)
                if depth is not None:
                    self.queue_samples.append((time.time(), depth))
                if self.completed() >= n:
                    return
                self.check_deadline(f"waiting for {n} tasks to finish")
                time.sleep(poll_s)


def broker_version(app: Celery) -> str:
    """The broker's product and version."""
    try:
        with app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1)
            if conn.transport.driver_type == "redis":
                return "redis " + conn.default_channel.client.info("server")["redis_version"]
            props = getattr(conn.connection, "server_properties", {}) or {}
            product = props.get("product", b"")
            product = product.decode() if isinstance(product, bytes) else str(product)
            version = props.get("version", b"")
            version = version.decode() if isinstance(version, bytes) else str(version)
            return f"{product} {version}".strip()
    except Exception as exc:  # nice to have; the run must not fail for it
        return f"unknown ({type(exc).__name__})"


def _connection_errors() -> tuple[type[BaseException], ...]:
    """What a broker (or a Redis backend) going away mid-run raises, over the clients the run uses."""
    import amqp.exceptions
    import redis.exceptions
    from kombu.exceptions import OperationalError

    return (ConnectionError, TimeoutError, OperationalError, amqp.exceptions.ConnectionError,
            redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def _where(url: str) -> str:
    """host:port of a service URL, never its credentials."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.removeprefix("db+"))
        return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
    except ValueError:
        return "?"


def connection_lost(exc: BaseException, spec: RunSpec | None) -> str | None:
    """The run's error when ``exc`` is a connection to the broker or backend lost mid-run (a
    restart, a crash, the network): which services the run was using and where, then what the
    client said. None for any other exception."""
    if spec is None or not isinstance(exc, _connection_errors()):
        return None
    services = [f"broker {spec.broker} at {_where(os.environ.get('CMX_BROKER_URL', ''))}"]
    if spec.backend in ("redis", "postgres"):
        services.append(f"backend {spec.backend} at {_where(os.environ.get('CMX_BACKEND_URL', ''))}")
    return (f"lost the connection to the {' or the '.join(services)} mid-run: "
            + f"{type(exc).__name__}: {exc}".splitlines()[0][:300])


def main(argv: list[str] | None = None) -> int:
    run_dir, host = run_dir_from_env(), host_from_env()
    write_atomic(run_dir / "driver.pid", str(os.getpid()))
    started = time.time()
    result: dict = {"status": "failed", "error": None, "started_at": started}
    ctx = spec = None
    try:
        spec = RunSpec.load(run_dir)
        workload = registry.get(spec.workload)
        params = workload.Params.model_validate(spec.params)
        app = create_app(spec, run_dir, host, client="driver")
        ctx = DriveContext(app, spec, run_dir, host, deadline=time.monotonic() + spec.run_timeout_s)
        result["broker_version"] = broker_version(app)
        ctx.declare_queues()
        workload.drive(ctx, params)
        result["status"] = "ok"
    except DriveTimeout as exc:
        result.update(status="timeout", error=str(exc))
    except WorkerProblem as exc:
        result.update(error=str(exc), silent_worker_hosts=exc.hosts if exc.silent else [])
    except Exception as exc:
        result["error"] = connection_lost(exc, spec) or f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        traceback.print_exc(file=sys.stderr)
    finally:
        if ctx is not None and ctx.watchdog is not None:
            ctx.watchdog.__exit__()
        try:
            recorder().flush()
        except AssertionError:
            pass  # failed before the app existed: nothing was recorded
        result["finished_at"] = time.time()
        if ctx is not None:
            result["consuming_at"] = ctx.consuming_at
            result["metrics"] = ctx.metrics
            result["notes"] = ctx.notes
            write_atomic(run_dir / "queue.csv", "ts,depth\n" + "".join(f"{t},{d}\n" for t, d in ctx.queue_samples))
        write_atomic(run_dir / "driver.json", json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The driver: the process on a ``drivers`` host that runs one workload for one run.

``python -m cmx.workloads.app.driver`` (with ``CMX_RUN_DIR``, ``CMX_HOST`` and the broker/backend URLs in
the environment) loads the run spec, waits for every worker of the run, hands control to the
workload's ``drive``, and writes ``driver.json`` (status, error, timings, broker and backend server
versions, the driver's own package versions, metrics the workload reported). It never raises past
``main``: what went wrong is in ``driver.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

from urllib.parse import urlsplit

from celery import Celery

from cmx.workloads.vocab import kinds
from cmx.workloads.servers import registry as servers
from cmx.workloads.app.factory import create_app
from cmx.workloads.drive import DriveTimeout, TasksLost, connection_errors
from cmx.workloads.catalog import registry
from cmx.workloads.vocab.dimensions import version_matches
from cmx.workloads.drive.context import DriveContext
from cmx.workloads.drive.workerwatch import WorkerProblem
from cmx.workloads.runtime.files import write_atomic
from cmx.workloads.runtime.fingerprint import versions as package_versions
from cmx.workloads.runtime.instrument import recorder
from cmx.workloads.runtime.spec import RunSpec, host_from_env, run_dir_from_env

# DriveContext/DriveTimeout: their old home
__all__ = ["DriveContext", "DriveTimeout", "backend_version", "broker_version", "main"]


def broker_version(app: Celery) -> str:
    """The broker's product and version, asked of its server (workloads/servers/)."""
    try:
        with app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1)
            return servers.of_scheme(urlsplit(conn.as_uri()).scheme).broker_version(conn)
    except Exception as exc:  # nice to have; the run must not fail for it
        return f"unknown ({type(exc).__name__})"


def backend_version(app: Celery, backend: str) -> str | None:
    """The result backend's server and version, asked of the server the way the driver reaches it;
    None when the backend has no server of its own (``rpc`` replies through the broker, ``none``)."""
    service = kinds.BACKENDS[backend].service if backend in kinds.BACKENDS else None
    if service is None:
        return None
    try:
        return servers.get(service).backend_version(app)
    except Exception as exc:  # nice to have, as the broker's
        return f"unknown ({type(exc).__name__})"


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
    if spec is None or not isinstance(exc, connection_errors()):
        return None
    services = [f"broker {spec.broker} at {_where(os.environ.get('CMX_BROKER_URL', ''))}"]
    if kinds.BACKENDS[spec.backend].service is not None:
        services.append(f"backend {spec.backend} at {_where(os.environ.get('CMX_BACKEND_URL', ''))}")
    return (
        f"lost the connection to the {' or the '.join(services)} mid-run: "
        + f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    )


class PackageMismatch(Exception):
    """The driver imports another version of a package than its cell's ``package.*`` asks."""


def check_queue_type(app: Celery, spec: RunSpec) -> list[dict]:
    """Read back from the broker the type of the run's queue, for a broker with queue types
    (RabbitMQ's classic and quorum); a queue of another type than the cell asks fails the run."""
    server = servers.service_of("broker", spec.broker)
    if server is None or len(server.queue_types) < 2:
        return []
    want = kinds.queue_type_of(spec.broker, spec.queue_type)
    with app.connection_for_write() as conn:
        got, source = server.queue_type(conn, spec.queue, spec.queue_arguments())
    if got != want:
        raise RuntimeError(
            f"the broker's queue {spec.queue} is {got} (read from its {source}), not the {want} queue the cell asks"
        )
    return [{"queue": spec.queue, "type": got, "source": source}]


def check_packages(spec: RunSpec, found: dict[str, str | None]) -> None:
    """Raise :class:`PackageMismatch` naming each package, the version the cell asks and the one
    this process imported."""
    bad = [
        f"cell asks package.{name} {wanted!r}; driver runs {found.get(name)!r}"
        for name, wanted in spec.packages.items()
        if not version_matches(wanted, found.get(name))
    ]
    if bad:
        raise PackageMismatch("the driver does not run what the cell asks: " + "; ".join(bad))


def warm() -> None:
    """Import the run's broker transport and result backend ahead of :func:`main`
    (workloads/host/drivewarm.py), from the URLs the app factory gives the run: no connection."""
    from celery.app.backends import by_url
    from kombu import Connection

    from cmx.workloads.app.factory import backend_url, broker_settings

    spec = RunSpec.load(run_dir_from_env())
    Connection(broker_settings(spec)[0]).transport  # noqa: B018 (the property imports the transport)
    if url := backend_url(spec):
        by_url(url)


def main(argv: list[str] | None = None) -> int:
    run_dir, host = run_dir_from_env(), host_from_env()
    write_atomic(run_dir / "driver.pid", str(os.getpid()))
    started = time.time()
    # packages: the versions this driver process runs with (table packages, role driver).
    result: dict = {"status": "failed", "error": None, "started_at": started, "packages": package_versions()}
    ctx = spec = None
    try:
        spec = RunSpec.load(run_dir)
        check_packages(spec, result["packages"])
        workload = registry.get(spec.workload)
        params = workload.Params.model_validate(spec.params)
        app = create_app(spec, run_dir, host, client="driver")
        ctx = DriveContext(app, spec, run_dir, host, deadline=time.monotonic() + spec.run_timeout_s)
        result["broker_version"] = broker_version(app)
        result["backend_version"] = backend_version(app, spec.backend)
        ctx.declare_queues()
        result["queues"] = check_queue_type(app, spec)
        try:
            workload.drive(ctx, params)
        finally:  # the run's end for a fault run's trailing stall: the driver stopped waiting (settled, timed out)
            result["drive_ended_at"] = time.time()
        if ctx.consuming_at is not None:  # its work is done: after the workload's own timing, not in it
            ctx.mark("drain")
        result["status"] = "ok"
    except DriveTimeout as exc:
        result.update(status="timeout", error=str(exc))
    except PackageMismatch as exc:
        result["error"] = str(exc)
    except TasksLost as exc:  # failed, but what did run is stored: the lost ones are tasks_lost
        result.update(error=str(exc), lost_before_queue=exc.lost)
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
        if ctx is not None and not ctx.leads and result["status"] != "ok" and ctx.consuming_at is None:
            from cmx.workloads.drive.drivers import give_up

            give_up(ctx.app, ctx.spec, ctx.host, result["error"] or result["status"])
        if ctx is not None:
            result["consuming_at"] = ctx.consuming_at
            result["metrics"] = ctx.metrics
            result["notes"] = ctx.notes
            write_atomic(run_dir / "queue.csv", "ts,depth\n" + "".join(f"{t},{d}\n" for t, d in ctx.queue_samples))
        write_atomic(run_dir / "driver.json", json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    from cmx.workloads.runtime.quickexit import exit_now

    exit_now(main())  # its files are written: no interpreter teardown inside the run's drive

"""The sweep: provision once, then for each run start ▶ drive ▶ stop + fetch ▶ ingest.

A run's start is stored before it runs and its end after, so a crash still leaves a record.
Progress goes to a :class:`SweepHandler` (the CLI's progress bar is one), never to print().
"""
from __future__ import annotations

import enum
import json
import signal
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from engine import db
from engine.ansible import PlaybookResult, run_playbook
from engine.experiment import Experiment
from engine.ingest import HostInfo, ingest_run
from engine.inventory import Inventory
from engine.planner import Run
from engine.preflight import check_backend, check_broker
from engine.provision import provision, stop_services
from workloads import registry
from workloads.clock import ClockServer
from workloads.files import write_atomic
from workloads.spec import RunSpec, node_name

LOOPBACK = {"127.0.0.1", "localhost", "::1", ""}
#: Seconds between TERM and KILL for workers whose drive finished (their recorders flush every
#: 0.5 s, so every row is on disk by then); warm shutdown of prefork alone takes ~2.3 s.
DRAINED_STOP_GRACE_S = 1.0
DRIVE_TASK = "Run the driver until the workload is done or the run times out."
FINISH_TASK = "Finish the run on the host (stop, reset, facts, pack)."


def start_drive_stages(started: PlaybookResult) -> dict[str, float]:
    """start (until the driver task began, Ansible's own start included) and drive."""
    at = started.task_started.get(DRIVE_TASK, started.seconds)
    return {"start": round(at, 3), "drive": round(started.seconds - at, 3)}


def finish_reports(stopped: PlaybookResult) -> dict[str, dict]:
    """What each host's `hostctl finish` said it did: {host: {"seconds": {step: s}, "failed": [...]}}."""
    reports = {}
    for (task, host), out in stopped.stdout.items():
        if task == FINISH_TASK:
            try:
                reports[host] = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                pass
    return reports


def stop_collect_stages(stopped: PlaybookResult) -> dict[str, float]:
    """stop (until the slowest host had stopped its processes, as its `hostctl finish` reported)
    and collect (reset, facts, pack, fetch: everything after)."""
    stop_s = max([float(r.get("seconds", {}).get("stop", 0.0)) for r in finish_reports(stopped).values()] or [0.0])
    at = min(stopped.task_started.get(FINISH_TASK, 0.0) + stop_s, stopped.seconds)
    return {"stop": round(at, 3), "collect": round(stopped.seconds - at, 3)}


def take_local_packs(stopped: PlaybookResult, art_dir: Path) -> None:
    """Hosts reached with ``ansible_connection: local`` are this machine: their pack is moved from
    where ``hostctl finish`` left it (run_stop.yml fetches only from remote hosts)."""
    import shutil

    for host, report in finish_reports(stopped).items():
        target, pack = art_dir / f"{host}.tgz", Path(report.get("pack") or "")
        if not target.exists() and pack.is_file():
            shutil.move(pack, target)


def explain_begin_failures(started: PlaybookResult, art_dir: Path) -> PlaybookResult:
    """`hostctl begin` is not logged (its arguments hold secrets): name what failed from the
    begin.log the host's artifacts brought back."""
    from dataclasses import replace

    from engine.ansible import Failure

    failures = []
    for f in started.failures:
        log = art_dir / f.host / "begin.log"
        if f.task.startswith("Begin the run") and log.is_file():
            lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
            if lines:
                f = Failure(f.host, f.task, lines[-1][:400], f.unreachable)
        failures.append(f)
    return replace(started, failures=tuple(failures))


def record_harness_overhead(con, run_id: str, wall_s: float) -> float:
    """Store and return the run's wall time minus the time its tasks were in flight (first sent
    to last finished): what the harness cost this run."""
    (in_flight,) = con.execute("SELECT max(finished_at) - min(sent_at) FROM tasks WHERE run_id = ?",
                               [run_id]).fetchone()
    value = max(wall_s - (in_flight or 0.0), 0.0)
    con.execute("INSERT INTO metrics VALUES (?, 'harness_overhead_s', ?, 's')", [run_id, value])
    return value


class RunStatus(str, enum.Enum):
    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class RunOutcome:
    run: Run
    status: RunStatus
    error: str | None
    metrics: dict[str, float | None] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)


class SweepHandler(Protocol):
    def sweep_started(self, total: int, skipped: int) -> None: ...
    def stage(self, run: Run | None, stage: str) -> None: ...
    def run_finished(self, outcome: RunOutcome) -> None: ...


class Interrupted(Exception):
    """The user pressed Ctrl-C; the current run was stopped and stored."""


def _dims(run: Run) -> dict:
    return dict(run.cell.values)


def run_label(run: Run, varying: list[str]) -> str:
    vals = run.cell.values
    return " ".join(f"{k}={vals[k]}" for k in varying) + f" #{run.repeat}"


@dataclass
class RunTargets:
    """Which hosts do what in one run."""

    workers: tuple[str, ...]
    driver: str
    hosts: tuple[str, ...]
    sampler_args: dict[str, str]


class Sweep:
    """Executes the runs of one experiment against one inventory, storing each in the database."""

    def __init__(self, exp: Experiment, inventory: Inventory, db_path: Path, results_dir: Path,
                 handler: SweepHandler, stop_grace_s: float = 5.0):
        self.exp = exp
        self.inventory = inventory
        self.db_path = db_path
        self.results_dir = results_dir
        self.handler = handler
        self.stop_grace_s = stop_grace_s
        self.sweep_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self._interrupted = False
        self.lib_key = ""  # set by provisioning: which shipped version of workloads/ runs
        self.warnings: list[str] = []  # said to the user after the summary

    # -- planning helpers -------------------------------------------------------------------
    def targets(self, run: Run) -> RunTargets:
        vals = run.cell.values
        workers = self.inventory.workers_for(vals["machines"])
        driver = self.inventory.driver()
        hosts = list(dict.fromkeys([*workers, driver]))
        args: dict[str, list[str]] = {h: ["--watch worker={{ __cmx_run_dir }}/worker.pid",
                                          "--watch driver={{ __cmx_run_dir }}/driver.pid"] for h in hosts}
        broker_host = self.inventory.hosts_of("brokers")[0]
        port = self._local_port(broker_host, self.inventory.broker_url(vals["broker"]))
        if port:
            args.setdefault(broker_host, []).append(f"--watch-port broker={port}")
        kind = "redis" if vals["broker"] == "redis" else "rabbitmq"
        args[driver].append(f"--connections broker={kind}")
        if vals["backend"] in ("redis", "postgres"):
            backend_host = self.inventory.hosts_of("backends")[0]
            port = self._local_port(backend_host, self.inventory.backend_url(vals["backend"]))
            if port:
                args.setdefault(backend_host, []).append(f"--watch-port backend={port}")
            args[driver].append(f"--connections backend={vals['backend']}")
        workload = registry.get(self.exp.workload.name)
        if workload.service_module:
            service_host = self.inventory.service_host()
            args.setdefault(service_host, []).append("--watch service={{ __cmx_run_dir }}/service.pid")
        hosts = list(dict.fromkeys([*hosts, *args]))
        return RunTargets(workers=workers, driver=driver, hosts=tuple(hosts),
                          sampler_args={h: " ".join(a) for h, a in args.items()})

    def _local_port(self, host: str, url: str | None) -> int | None:
        """The service's port when it runs on ``host`` itself (so its process can be sampled)."""
        if not url:
            return None
        parts = urlsplit(url.removeprefix("db+"))
        if parts.hostname in LOOPBACK or parts.hostname in (host, self.inventory.address(host)):
            return parts.port or {"redis": 6379, "amqp": 5672, "postgresql": 5432}.get(parts.scheme)
        return None

    def spec(self, run: Run, targets: RunTargets) -> RunSpec:
        vals = run.cell.values
        return RunSpec(
            run_id=run.run_id, experiment=run.experiment, cell_id=run.cell.cell_id, repeat=run.repeat,
            workload=self.exp.workload.name,
            params={k.removeprefix("params."): v for k, v in vals.items() if k.startswith("params.")},
            broker=vals["broker"], backend=vals["backend"], pool=vals["pool"], concurrency=vals["concurrency"],
            prefetch_multiplier=vals["prefetch_multiplier"], heartbeat=vals["heartbeat"],
            celery={k.removeprefix("celery."): v for k, v in vals.items() if k.startswith("celery.")},
            worker_flags={k.removeprefix("worker."): v for k, v in vals.items() if k.startswith("worker.")},
            worker_nodes=[node_name(run.run_id, h) for h in targets.workers],
            warmup_s=self.exp.limits.warmup, run_timeout_s=self.exp.limits.run_timeout,
            service_url=self._service_url(),
        )

    def _service_url(self) -> str | None:
        if not registry.get(self.exp.workload.name).service_module:
            return None
        host = self.inventory.service_host()
        port = int(self.inventory.hostvars.get(host, {}).get("cmx_service_port", 8765))
        return f"http://{self.inventory.address(host)}:{port}"

    def secrets(self, run: Run) -> dict[str, str]:
        vals = run.cell.values
        api = self.inventory.rabbitmq_api_url() if vals["broker"].startswith("rabbitmq") else None
        database = self.inventory.database_url() if registry.get(self.exp.workload.name).needs_database else None
        return {"CMX_BROKER_URL": self.inventory.broker_url(vals["broker"]),
                "CMX_BACKEND_URL": self.inventory.backend_url(vals["backend"]) or "",
                "CMX_RABBITMQ_API": api or "", "CMX_DATABASE_URL": database or ""}

    # -- execution ----------------------------------------------------------------------------
    def execute(self, runs: list[Run], skipped: int = 0) -> list[RunOutcome]:
        """Run everything, in order; stops early on abort or Ctrl-C (raising Interrupted)."""
        self.handler.sweep_started(len(runs), skipped)
        with db.connect(self.db_path) as con:
            db.record_sweep(con, self.sweep_id, self.exp.name, self.exp.source, self.exp.workload.name,
                            self.exp.description, str(self.inventory.path),
                            self.exp.model_dump(mode="json", by_alias=True))
        if not runs:
            return []
        for run in runs:  # every URL must resolve before any host is touched
            self.secrets(run)
            self.targets(run)
        hosts = sorted({h for run in runs for h in self.targets(run).hosts})
        self.handler.stage(None, f"provisioning {len(hosts)} host(s)")
        services = self.inventory.services_to_provision({r.cell.values["broker"] for r in runs},
                                                        {r.cell.values["backend"] for r in runs})
        self.lib_key = provision(self.inventory, hosts, self.results_dir, services)
        try:
            return self._execute_provisioned(runs)
        finally:
            if services:
                self.handler.stage(None, "stopping the services the sweep started")
                warning = stop_services(self.inventory, services, self.results_dir)
                if warning:
                    self.warnings.append(warning)

    def _execute_provisioned(self, runs: list[Run]) -> list[RunOutcome]:
        self.handler.stage(None, "checking brokers and backends")
        for kind in sorted({r.cell.values["broker"] for r in runs}):
            check_broker(self.inventory.broker_url(kind))
        for kind in sorted({r.cell.values["backend"] for r in runs} - {"none", "rpc"}):
            check_backend(kind, self.inventory.backend_url(kind))
        outcomes: list[RunOutcome] = []
        previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            for run in runs:
                if self._interrupted:
                    break
                outcome = self.execute_run(run)
                outcomes.append(outcome)
                self.handler.run_finished(outcome)
                if outcome.status is not RunStatus.OK and self.exp.on_error == "abort":
                    break
        finally:
            signal.signal(signal.SIGINT, previous)
        if self._interrupted:
            raise Interrupted(outcomes)
        return outcomes

    def _on_sigint(self, signum, frame) -> None:
        if self._interrupted:
            self.handler.stage(None, "stopping the current run, please wait")
        self._interrupted = True

    def execute_run(self, run: Run) -> RunOutcome:
        targets = self.targets(run)
        art_dir = self.results_dir / "artifacts" / run.run_id
        art_dir.mkdir(parents=True, exist_ok=True)
        spec = self.spec(run, targets)
        secrets = self.secrets(run)
        with db.connect(self.db_path) as con:
            db.record_run_start(con, experiment=run.experiment, sweep_id=self.sweep_id, run_id=run.run_id,
                                cell_id=run.cell.cell_id, repeat=run.repeat, workload=spec.workload,
                                dims=_dims(run), params=spec.params, warmup_s=spec.warmup_s)
        common = {"cmx_run_id": run.run_id, "cmx_run_hosts": ",".join(targets.hosts), "cmx_lib_key": self.lib_key}
        service = registry.get(self.exp.workload.name).service_module
        if service:
            common |= {"cmx_service_host": self.inventory.service_host(), "cmx_service_module": service,
                       "cmx_service_port": int(spec.service_url.rsplit(":", 1)[1])}
        stages: dict[str, float] = {}
        run_t0 = time.monotonic()

        self.handler.stage(run, "start + drive")
        started = run_playbook(
            "run.yml", self.inventory.path, art_dir / "ansible" / "run",
            extravars={**common, "cmx_workers": ",".join(targets.workers), "cmx_driver": targets.driver,
                       "cmx_spec": spec.model_dump(mode="json"), "cmx_sampler_args": targets.sampler_args,
                       "cmx_drive_timeout": int(spec.run_timeout_s + 30)},
            secrets=secrets, timeout=spec.run_timeout_s + 300, cancel=lambda: self._interrupted)
        stages.update(start_drive_stages(started))

        self.handler.stage(run, "stop + fetch")
        with ClockServer() as clock:  # hosts measure their clock offset against it while collecting
            stopped = run_playbook(
                "run_stop.yml", self.inventory.path, art_dir / "ansible" / "stop",
                extravars={**common, "cmx_artifacts_dir": str(art_dir.resolve()),
                           "cmx_stop_grace": self._stop_grace(started), "cmx_driver": targets.driver,
                           "cmx_clock_port": clock.port},
                secrets=secrets, timeout=600)
        stages.update(stop_collect_stages(stopped))
        take_local_packs(stopped, art_dir)
        for tgz in art_dir.glob("*.tgz"):
            with tarfile.open(tgz) as tar:
                tar.extractall(art_dir / tgz.name.removesuffix(".tgz"), filter="data")
            tgz.unlink()
        started = explain_begin_failures(started, art_dir)

        self.handler.stage(run, "ingest")
        t0 = time.monotonic()
        hosts = {h: HostInfo(groups=self.inventory.groups_of(h)) for h in targets.hosts}
        metrics: dict = {}
        driver: dict = {}
        ingest_error = None
        try:
            with db.connect(self.db_path) as con:
                got = ingest_run(con, run.run_id, art_dir, spec.warmup_s, hosts)
            metrics, driver = got.metrics, got.driver
        except Exception as exc:
            ingest_error = f"ingest failed: {type(exc).__name__}: {exc}".splitlines()[0]
        stages["ingest"] = time.monotonic() - t0

        status, error = self._status(started, stopped, driver, ingest_error)
        with db.connect(self.db_path) as con:
            metrics["harness_overhead_s"] = record_harness_overhead(con, run.run_id, time.monotonic() - run_t0)
            db.record_run_end(con, run.run_id, status.value, error, stages)
        write_atomic(art_dir / "run.json", json.dumps(
            {"run_id": run.run_id, "experiment": run.experiment, "cell_id": run.cell.cell_id, "repeat": run.repeat,
             "status": status.value, "error": error, "stage_seconds": stages, "values": _dims(run),
             "finish": finish_reports(stopped)}, indent=2))
        return RunOutcome(run, status, error, metrics, stages)

    def _stop_grace(self, started: PlaybookResult) -> float:
        """A drive that ended normally left drained workers: nothing to finish, a short grace."""
        if started.ok and not self._interrupted:
            return min(self.stop_grace_s, DRAINED_STOP_GRACE_S)
        return self.stop_grace_s

    def _status(self, started: PlaybookResult, stopped: PlaybookResult, driver: dict,
                ingest_error: str | None) -> tuple[RunStatus, str | None]:
        if self._interrupted:
            return RunStatus.FAILED, "interrupted by the user (Ctrl-C); its workers were stopped"
        if driver.get("status") == "timeout" or started.status == "timeout" or any(
                "timed out" in f.message.lower() or "timeout" in f.message.lower() for f in started.failures
                if f.task.startswith("Run the driver")):
            return RunStatus.TIMEOUT, driver.get("error") or f"run_timeout of {self.exp.limits.run_timeout:g}s passed"
        if not started.ok:
            return RunStatus.FAILED, started.summary()
        if driver.get("status") != "ok":
            return RunStatus.FAILED, driver.get("error") or "the driver wrote no result (see driver.log)"
        if ingest_error:
            return RunStatus.FAILED, ingest_error
        if not stopped.ok:
            return RunStatus.FAILED, "stopping or collecting failed: " + stopped.summary()
        return RunStatus.OK, None

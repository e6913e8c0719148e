"""The sweep: provision once and start one agent per host, then for each run start ▶ drive ▶
stop + fetch ▶ ingest, each step a round trip to the hosts' agents (engine/run/runsteps.py).
A run's start is stored before it runs and its end after, so a crash still leaves a record.
Progress goes to a :class:`SweepHandler` (the CLI's progress bar is one), never to print()."""

from __future__ import annotations

import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cmx.engine.errors import HostError
from cmx.engine.results import db
from cmx.engine.plan import ratesearch
from cmx.engine.hosts.agents import Agents
from cmx.engine.hosts.connection import connections
from cmx.engine.model.cells import value_text
from cmx.engine.model.experiment import Experiment
from cmx.engine.results.ingest import HostInfo
from cmx.engine.hosts.inventory import Inventory
from cmx.engine.plan.planner import Run
from cmx.engine.hosts.preflight import check_backend, check_broker
from cmx.engine.hosts.hostlock import WAIT_S, HostLocks
from cmx.engine.hosts.provision import prepare, provision_hosts, services_beside, stop_services, version_set_key
from cmx.engine.hosts.reach import blocked, survey
from cmx.engine.run.runinputs import begin_payloads, run_secrets, run_spec
from cmx.engine.run.targets import RunTargets, run_targets
from cmx.engine.run.faultrun import FaultScheduler, broker_place
from cmx.engine.run.runstatus import RunStatus, controller_identity
from cmx.engine.run.runstore import store_run
from cmx.engine.run.runsteps import StepResult, finish_and_collect, start_and_drive, unpack_artifacts
from cmx.engine.run.runsteps import record_harness_overhead as record_harness_overhead  # tests import it from here
from cmx.engine.run.runsteps import start_drive_stages, stop_collect_stages
from cmx.workloads.vocab import kinds
from cmx.workloads.catalog import registry
from cmx.workloads.runtime.clock import ClockServer
from cmx.workloads.vocab.dimensions import package_versions
from cmx.workloads.runtime.spec import RunSpec

#: Seconds between TERM and KILL for workers whose drive finished (their recorders flush every
#: 0.5 s, so every row is on disk by then); warm shutdown of prefork alone takes ~2.3 s.
DRAINED_STOP_GRACE_S = 1.0


@dataclass(frozen=True)
class RunOutcome:
    run: Run
    status: RunStatus
    error: str | None
    metrics: dict[str, float | None] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


class SweepHandler(Protocol):
    def sweep_started(self, total: int, skipped: int) -> None: ...
    def stage(self, run: Run | None, stage: str) -> None: ...
    def run_finished(self, outcome: RunOutcome) -> None: ...


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: the current run was stopped and stored as interrupted."""


def _dims(run: Run) -> dict:
    return dict(run.cell.values)


def run_label(run: Run, varying: list[str]) -> str:
    vals = run.cell.values
    # An include may add a dimension the other cells lack. When none varies (one cell, or --only
    # picked one), the cell id says which.
    shown = " ".join(f"{k}={value_text(vals[k])}" for k in varying if k in vals) or f"cell {run.cell.cell_id}"
    return f"{shown} #{run.repeat}"


class Sweep:
    """Executes the runs of one experiment against one inventory, storing each in the database."""

    def __init__(
        self,
        exp: Experiment,
        inventory: Inventory,
        db_path: Path,
        results_dir: Path,
        handler: SweepHandler,
        stop_grace_s: float = 5.0,
        tags: dict[str, str] | None = None,
        note: str | None = None,
    ):
        self.exp = exp
        self.inventory = inventory
        self.db_path = db_path
        self.results_dir = results_dir
        self.handler = handler
        self.stop_grace_s = stop_grace_s
        self.tags, self.note = tags or {}, note  # cmx run --tag/--note, stored with the sweep
        self.host_wait_s = WAIT_S  # cmx run --host-wait: the bound on waiting for another sweep's hosts
        self.sweep_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self._interrupted = False
        self.lib_key = ""  # set by provisioning: which shipped version of workloads/ runs
        self.warnings: list[str] = []  # said to the user after the summary
        #: More columns of the sweep's row: version, commit, hashes, revision (cmx.engine.run.provenance).
        self.provenance: dict = {}
        self.shuffle_seed: int | None = None  # cmx run --shuffle: stored with the sweep
        self.resumes: str | None = None  # the unfinished sweep (point of history) this one continues
        self.target_rates: dict[str, float] = {}  # run_id → rate a rate_fraction run publishes at
        self._searched: set[str] = set()  # search cells run in this sweep (run once, even if they failed)
        self.agents: Agents | None = None  # one per host, for the sweep (engine/hosts/agents.py)
        self.blocked: dict[str, str] = {}  # run_id → the unreachable host it needs (engine/hosts/reach.py)
        #: Which of the planned runs to run, in order, decided as they go (a race: cli/race.py); None: all.
        self.schedule = None
        #: version set key -> the host environment of a package.* version set (set by provisioning).
        self.environments: dict[str, str] = {}

    # -- planning helpers -------------------------------------------------------------------
    def targets(self, run: Run) -> RunTargets:
        return run_targets(self.inventory, self.exp.workload.name, run.cell.values)

    def spec(self, run: Run, targets: RunTargets) -> RunSpec:
        return run_spec(
            self.exp,
            self.inventory,
            run,
            targets,
            self.agents.conns,
            self.environments,
            self.target_rates.get(run.run_id),
        )

    def secrets(self, run: Run) -> dict[str, str]:
        return run_secrets(self.exp, self.inventory, run)

    # -- execution ----------------------------------------------------------------------------
    def execute(self, runs: list[Run], skipped: int = 0) -> list[RunOutcome]:
        """Run everything, in order; stops early on abort or Ctrl-C (raising Interrupted)."""
        self.handler.sweep_started(len(runs), skipped)
        with db.connect(self.db_path) as con:
            db.record_sweep(
                con,
                self.sweep_id,
                self.exp.name,
                self.exp.source,
                self.exp.workload.name,
                self.exp.description,
                str(self.inventory.path),
                self.exp.model_dump(mode="json", by_alias=True),
                self.provenance,
                shuffle_seed=self.shuffle_seed,
                tags=self.tags,
                note=self.note,
                planned=len(runs),
                resumes=self.resumes,
            )
            db.record_controller(con, self.sweep_id, *controller_identity())
        if not runs:
            return []
        for run in runs:  # every URL must resolve before any host is touched
            self.secrets(run)
            self.targets(run)
        conns = connections(self.inventory.path, sorted({h for run in runs for h in self.targets(run).hosts}))
        # One sweep at a time on a host's work dir: a second one waits here, saying for whom (issue 43).
        locks = HostLocks(
            {"experiment": self.exp.name, "db": str(self.db_path), "sweep": self.sweep_id},
            self.host_wait_s,
            say=lambda line: print(line, file=sys.stderr, flush=True),
        )
        locks.acquire(conns)
        try:
            return self._execute_on(runs, conns)
        finally:
            locks.release()

    def _execute_on(self, runs: list[Run], conns: dict) -> list[RunOutcome]:
        """Provision the hosts (their locks held), run everything, stop what the sweep started."""
        from cmx.engine.model.user_code import sources

        user_code = sources(self.exp, list({r.cell.cell_id: r.cell for r in runs}.values()))
        # One environment per package.* version set (workloads/vocab/dimensions.py), built beside the venv.
        version_sets = {version_set_key(v): v for r in runs if (v := package_versions(r.cell.values))}
        shipment = prepare(
            self.results_dir,
            user_code,
            list(self.exp.workload.requirements),
            list(version_sets.values()),
            registry.get(self.exp.workload.name).host_requirements,
        )
        # One round trip per host, all at once: a host down now fails the runs that need it and the
        # others go on; a host holding the shipment's key is not provisioned again (engine/hosts/reach.py).
        lost, keys = survey(conns, shipment.key_files)
        self.blocked = blocked({r.run_id: self.targets(r).hosts for r in runs}, lost)
        live = [r for r in runs if r.run_id not in self.blocked]
        hosts = sorted({h for run in live for h in self.targets(run).hosts})
        if not live:
            return self._execute_provisioned(runs)
        held = {h for h in hosts if shipment.held_by(keys.get(h, ""))}
        self.handler.stage(None, f"provisioning {len(hosts)} host(s)" + (f" ({len(held)} checked)" if held else ""))
        services = self.inventory.services_to_provision(
            {r.cell.values["broker"] for r in live}, {r.cell.values["backend"] for r in live}
        )
        try:
            # Inside: a provisioning that failed half-way (one server of several up) is stopped too.
            with services_beside(self.inventory, services, self.results_dir):
                provision_hosts(self.inventory, hosts, self.results_dir, shipment, held)
                self.lib_key, self.environments = shipment.lib_key, dict(shipment.chosen)
                self.handler.stage(None, f"starting the cmx agent on {len(hosts)} host(s)")
                self.agents = Agents(conns, self.lib_key, self.results_dir / "agents")
                failed = self.agents.start(hosts)
            if failed:
                raise HostError(
                    "starting the cmx agent failed: "
                    + "; ".join(f"{h}: unreachable: {why}" for h, why in failed.items())
                )
            return self._execute_provisioned(runs)
        finally:
            if self.agents is not None:
                self.agents.close()
            if services:
                self.handler.stage(None, "stopping the services the sweep started")
                warning = stop_services(self.inventory, services, self.results_dir)
                if warning:
                    self.warnings.append(warning)

    def _execute_provisioned(self, runs: list[Run]) -> list[RunOutcome]:
        self.handler.stage(None, "checking brokers and backends")
        live = [r for r in runs if r.run_id not in self.blocked]
        for kind in sorted({r.cell.values["broker"] for r in live}):
            check_broker(self.inventory.broker_url(kind))
        for kind in sorted({b for b in (r.cell.values["backend"] for r in live) if kinds.BACKENDS[b].service}):
            check_backend(kind, self.inventory.backend_url(kind))
        outcomes: list[RunOutcome] = []
        # SIGTERM (timeout(1), CI runners, systemd) is handled as Ctrl-C: stop the run, store it.
        previous = {sig: signal.signal(sig, self._on_sigint) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            for run in self.schedule(runs) if self.schedule else runs:
                if self._interrupted:
                    break
                error = self.blocked.get(run.run_id) or (
                    self._rate_for(run) if ratesearch.FRACTION in run.cell.values else None
                )
                outcome = self.execute_run(run) if error is None else self._refuse(run, error)
                outcomes.append(outcome)
                self.handler.run_finished(outcome)
                if outcome.status is not RunStatus.OK and self.exp.on_error == "abort":
                    break
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self._interrupted:
            raise Interrupted(outcomes)
        return outcomes

    def _rate_for(self, run: Run) -> str | None:
        """Set the run's target rate from its cell's maximum sustainable rate, running the cell's
        search run first when none is stored (engine/plan/ratesearch.py); an error sentence if there is none."""
        search = ratesearch.search_cell(self.exp.workload.name, run.cell)
        with db.connect(self.db_path) as con:
            best = ratesearch.stored_max(con, run.experiment, search.cell_id)
        if best is None and search.cell_id not in self._searched:
            self._searched.add(search.cell_id)
            search_run = Run(f"{search.cell_id}-1-{uuid.uuid4().hex[:8]}", run.experiment, search, 1)
            self.handler.stage(
                None, f"finding the maximum sustainable rate of {run.cell.cell_id} (search run {search_run.run_id})"
            )
            outcome = self.execute_run(search_run)
            with db.connect(self.db_path) as con:
                best = ratesearch.stored_max(con, run.experiment, search.cell_id)
                how = (
                    ratesearch.judge(con, search_run.run_id)[1] if best else f"{outcome.status.value}: {outcome.error}"
                )
            self.handler.stage(None, f"search run {search_run.run_id}: {how}")
        if best is None:
            return (
                f"no maximum sustainable rate for this cell: its search run (cell {search.cell_id}) failed "
                "(see `cmx status`)"
            )
        self.target_rates[run.run_id] = best * float(run.cell.values[ratesearch.FRACTION])
        return None

    def _refuse(self, run: Run, error: str) -> RunOutcome:
        """Store a run that could not start as failed, with why."""
        with db.connect(self.db_path) as con:
            db.record_run_start(
                con,
                experiment=run.experiment,
                sweep_id=self.sweep_id,
                run_id=run.run_id,
                cell_id=run.cell.cell_id,
                repeat=run.repeat,
                workload=self.exp.workload.name,
                dims=_dims(run),
                params={},
                warmup_s=self.exp.limits.warmup,
                seq=run.seq or None,
            )
            db.record_run_end(con, run.run_id, RunStatus.FAILED.value, error, {})
        return RunOutcome(run, RunStatus.FAILED, error)

    def _on_sigint(self, signum, frame) -> None:
        if self._interrupted:
            self.handler.stage(None, "stopping the current run, please wait")
        self._interrupted = True

    def execute_run(self, run: Run) -> RunOutcome:
        targets = self.targets(run)
        art_dir = self.results_dir / "artifacts" / run.run_id
        art_dir.mkdir(parents=True, exist_ok=True)
        spec = self.spec(run, targets)
        with db.connect(self.db_path) as con:
            db.record_run_start(
                con,
                experiment=run.experiment,
                sweep_id=self.sweep_id,
                run_id=run.run_id,
                cell_id=run.cell.cell_id,
                repeat=run.repeat,
                workload=spec.workload,
                dims=_dims(run),
                params=spec.params,
                warmup_s=spec.warmup_s,
                seq=run.seq or None,
                loaded=registry.get(self.exp.workload.name),
            )
        stages: dict[str, float] = {}
        run_t0 = time.monotonic()
        conns = self.agents.conns

        self.handler.stage(run, "start + drive")
        faults = FaultScheduler(
            self.agents,
            run.run_id,
            spec.faults,
            targets.driver,
            targets.workers,
            {"broker": self.inventory.hosts_of("brokers")[0], "driver": targets.driver},
            restart_s=spec.fault_restart_s,
            ready_timeout=max(conns[h].worker_ready_timeout for h in targets.workers),
            shutdown_timeout=spec.run_timeout_s,
            broker=broker_place(self.inventory, run.cell.values["broker"]) if spec.faults else None,
        )
        payloads = begin_payloads(self.exp, self.inventory, run, targets, spec, conns)
        started = start_and_drive(
            self.agents,
            run.run_id,
            payloads,
            targets.drivers,
            drive_timeout=spec.run_timeout_s + 30,
            ready_timeout=max(conns[h].worker_ready_timeout for h in targets.hosts),
            cancel=lambda: self._interrupted,
            during=faults,
        )
        stages.update(start_drive_stages(started))

        self.handler.stage(run, "stop + fetch")
        with ClockServer() as clock:  # hosts measure their clock offset against it while collecting
            stopped = finish_and_collect(
                self.agents,
                run.run_id,
                list(targets.hosts),
                targets.driver,
                self._stop_grace(started),
                clock.port,
                {h: conns[h].keep_files for h in targets.hosts},
                art_dir,
            )
        stages.update(stop_collect_stages(stopped))
        t0 = time.monotonic()
        collected, collect_error = unpack_artifacts(art_dir)
        stages["collect"] = round(stages["collect"] + time.monotonic() - t0, 3)

        self.handler.stage(run, "ingest")
        hosts = {h: HostInfo(groups=self.inventory.groups_of(h), collected=h in collected) for h in targets.hosts}
        status, error, metrics, notes = store_run(
            self.db_path,
            run,
            spec,
            targets,
            art_dir,
            hosts,
            collect_error,
            started,
            stopped,
            stages,
            interrupted=self._interrupted,
            run_t0=run_t0,
        )
        self.agents.forget(run.run_id)
        return RunOutcome(run, status, error, metrics, stages, notes)

    def _stop_grace(self, started: StepResult) -> float:
        """A drive that ended normally left drained workers: nothing to finish, a short grace."""
        if started.ok and not self._interrupted:
            return min(self.stop_grace_s, DRAINED_STOP_GRACE_S)
        return self.stop_grace_s

"""A run's end, stored: what its hosts recorded ingested into the results database (tasks, samples,
workers' config), its status decided from its steps and what ingest found (engine/run/runstatus.py,
then engine/run/placement.py), its end recorded with its stages' seconds, and ``run.json`` written
beside its artifacts."""

from __future__ import annotations

import json
import time
from pathlib import Path

from cmx.engine.plan import ratesearch
from cmx.engine.plan.planner import Run
from cmx.engine.results import db
from cmx.engine.results.ingest import HostInfo, ingest_run, not_run
from cmx.engine.results.ingest_workers import ingest_workers, worker_causes
from cmx.engine.run import placement
from cmx.engine.run.runstatus import RunStatus, decide as decide_status
from cmx.engine.run.runsteps import StepResult, finish_reports, record_harness_overhead
from cmx.engine.run.targets import RunTargets
from cmx.workloads.runtime.files import write_atomic
from cmx.workloads.runtime.spec import RunSpec
from cmx.workloads.vocab import metrics as M


def store_run(
    db_path: Path,
    run: Run,
    spec: RunSpec,
    targets: RunTargets,
    art_dir: Path,
    hosts: dict[str, HostInfo],
    collect_error: str | None,
    started: StepResult,
    stopped: StepResult,
    stages: dict[str, float],
    *,
    interrupted: bool,
    run_t0: float,
) -> tuple[RunStatus, str | None, dict, tuple[str, ...]]:
    """Ingest the run's artifacts in ``art_dir`` and store its end; its status, error, metrics and its
    driver's notes (what the workload says of how it ran, e.g. a replay's arrivals being receipts).
    ``stages`` gains ``ingest``; ``run_t0``: when the run started (monotonic), for the harness's cost."""
    t0 = time.monotonic()
    metrics: dict = {}
    driver: dict = {}
    ingest_error = None
    with db.connect(db_path) as con:  # one connection for the ingest and the run's end
        try:
            got = ingest_run(con, run.run_id, art_dir, spec.warmup_s, hosts, targets.drivers)
            metrics, driver = got.metrics, got.driver
            if driver.get("status") == "ok":
                ingest_error = ratesearch.after_ingest(con, run.run_id, spec.params)
            metrics |= ingest_workers(con, run.run_id, art_dir, targets.workers, targets.driver)
        except Exception as exc:
            ingest_error = f"ingest failed: {type(exc).__name__}: {exc}".splitlines()[0]
        ingest_error = collect_error or ingest_error
        if driver.get("silent_worker_hosts"):  # say why a worker went silent, from its host's record
            driver["error"] = f"{driver.get('error')}: " + worker_causes(
                art_dir, driver["silent_worker_hosts"], driver.get("finished_at")
            )
        status, error = decide_status(
            interrupted=interrupted,
            started=started,
            stopped=stopped,
            driver=driver,
            ingest_error=ingest_error,
            run_timeout_s=spec.run_timeout_s,
        )
        status, error = placement.verdict(con, run.run_id, status, error, metrics, art_dir, faulted=bool(spec.faults))
        if status is not RunStatus.OK:  # what it never ran is not run, not lost
            metrics |= not_run(con, run.run_id, int(driver.get("lost_before_queue") or 0))
        stages["ingest"] = time.monotonic() - t0
        metrics[M.HARNESS_OVERHEAD_S] = record_harness_overhead(con, run.run_id, time.monotonic() - run_t0)
        db.record_run_end(con, run.run_id, status.value, error, stages)
    try:
        write_atomic(
            art_dir / "run.json",
            json.dumps(
                {
                    "run_id": run.run_id,
                    "experiment": run.experiment,
                    "cell_id": run.cell.cell_id,
                    "repeat": run.repeat,
                    "status": status.value,
                    "error": error,
                    "stage_seconds": stages,
                    "values": dict(run.cell.values),
                    "finish": finish_reports(stopped),
                    "worker_events": list(started.worker_events),
                },
                indent=2,
            ),
        )
    except OSError:  # a full results disk: the database already holds the run's end
        pass
    return status, error, metrics, tuple(driver.get("notes") or ())

"""One run's steps on its hosts, through the hosts' agents (engine/hosts/agents.py): begin on every
host, then the drive on the driver hosts; afterwards finish on every host and bring the packs back.
While the driver runs, what a worker's host saw of its worker (it ended, it took its first task:
workloads/runtime/workerevents.py) is passed on to the driver's agent as it arrives: the driver may run on
another host, and a busy or dead worker cannot say so itself.

Each step's outcome is typed like a playbook's (status, failures naming host and step), which is
what engine/run/runstatus.py decides a run's status from.
"""

from __future__ import annotations

import shutil
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cmx.engine.hosts.agents import AgentLost, Agents, wait
from cmx.engine.hosts.outcome import Failure, Outcome

BEGIN_TASK = "Begin the run on the host (spec, secrets, sampler, service, worker)."
DRIVE_TASK = "Run the driver until the workload is done or the run times out."
FINISH_TASK = "Finish the run on the host (stop, reset, facts, pack)."
FETCH_TASK = "Fetch the run dir to the controller."
#: Seconds the controller waits beyond a step's own bound before it calls a host unresponsive.
SLACK_S = 60.0
#: Seconds the other drivers of a run may go on after its leading driver ended (which waited for
#: every task: the others have published theirs; one still waiting for the clock waits in vain).
OTHERS_AFTER_LEADER_S = 10.0


@dataclass(frozen=True)
class StepResult(Outcome):
    status: str  # successful, failed, timeout, canceled
    failures: tuple[Failure, ...] = ()
    seconds: float = 0.0
    #: Seconds from the step's start to the start of a part of it ("drive").
    marks: dict[str, float] = field(default_factory=dict)
    #: finish: what each host reported ({"seconds": {step: s}, "failed": [...], "pack": path}).
    reports: dict[str, dict] = field(default_factory=dict)
    #: start and drive: the worker events the hosts sent (workloads/runtime/workerevents.py, as JSON).
    worker_events: tuple[dict, ...] = ()

    def _what(self) -> str:
        return f"the run's step {self.status}"


def _lost(host: str, task: str, exc: Exception) -> Failure:
    return Failure(host, task, f"the cmx agent on {host} is gone: {exc}", unreachable=True)


def start_and_drive(
    agents: Agents,
    run_id: str,
    payloads: dict[str, dict],
    drivers: tuple[str, ...],
    drive_timeout: float,
    ready_timeout: float,
    cancel: Callable[[], bool],
    during: Callable[[], None] = lambda: None,
) -> StepResult:
    """``begin`` on every host together; once all began, the drive on every driver host (the
    first leads: workloads/drive/drivers.py). Bounded by the hosts' own timeouts plus
    :data:`SLACK_S`; ``cancel()`` (Ctrl-C) ends the wait at once. ``during()`` is called while
    the drive runs (a fault run's faults: engine/run/faultrun.py)."""
    t0 = time.monotonic()
    failures: list[Failure] = []
    lost = agents.start(list(payloads))  # an agent lost since the last run comes back
    failures += [
        Failure(h, BEGIN_TASK, f"cannot reach the cmx agent: {why}", unreachable=True) for h, why in lost.items()
    ]
    pending = {}
    for host, payload in payloads.items():
        if host in lost:
            continue
        try:
            pending[host] = agents[host].request("begin", run_id=run_id, payload=payload)
        except AgentLost as exc:
            failures.append(_lost(host, BEGIN_TASK, exc))
    try:
        for host, p in pending.items():
            try:
                reply = wait(p, ready_timeout * 2 + SLACK_S, cancel)
            except AgentLost as exc:
                failures.append(_lost(host, BEGIN_TASK, exc))
                continue
            except TimeoutError as exc:
                failures.append(Failure(host, BEGIN_TASK, str(exc), timed_out=True))
                continue
            if not reply.get("ok") or reply.get("rc"):
                failures.append(Failure(host, BEGIN_TASK, reply.get("error") or "failed"))
        if failures:
            return StepResult("failed", tuple(failures), time.monotonic() - t0)
        marks = {"drive": time.monotonic() - t0}
        relay = _Relay(agents, run_id, drivers[0])  # the leading driver watches the workers
        drives = {}
        for driver in drivers:
            try:
                drives[driver] = agents[driver].request("drive", run_id=run_id, timeout=drive_timeout)
            except AgentLost as exc:
                failures.append(_lost(driver, DRIVE_TASK, exc))
        timed_out, deadline = False, time.monotonic() + drive_timeout + SLACK_S
        while drives and not failures:  # the first driver that fails ends the wait: the finish stops the rest
            relay()
            during()
            if cancel():
                raise InterruptedError("cancelled")
            if drivers[0] not in drives:  # the leader ended: the others have done their part, or never will
                deadline = min(deadline, time.monotonic() + OTHERS_AFTER_LEADER_S)
            if time.monotonic() > deadline:
                timed_out = drivers[0] in drives
                break
            for driver in [d for d, p in drives.items() if p.done.is_set()]:
                try:
                    reply = wait(drives.pop(driver), 1.0)
                except (AgentLost, TimeoutError) as exc:
                    failures.append(_lost(driver, DRIVE_TASK, exc))
                    continue
                if reply.get("timed_out"):
                    failures.append(
                        Failure(
                            driver,
                            DRIVE_TASK,
                            f"the driver ran past {drive_timeout:g} s and was stopped",
                            timed_out=True,
                        )
                    )
                elif not reply.get("ok") or reply.get("rc"):
                    failures.append(
                        Failure(
                            driver,
                            DRIVE_TASK,
                            reply.get("error") or f"the driver exited with code {reply.get('rc')} (see driver.log)",
                        )
                    )
            if drivers[0] in drives:  # the run ends when its leader does: not up to a turn later
                drives[drivers[0]].done.wait(0.05)
            else:
                time.sleep(0.05)
        done = {"seconds": time.monotonic() - t0, "marks": marks, "worker_events": relay.events()}
        if failures:
            return StepResult("failed", tuple(failures), **done)
        if timed_out:
            return StepResult("timeout", (), **done)
        return StepResult("successful", (), **done)
    except InterruptedError:
        return StepResult("canceled", tuple(failures), time.monotonic() - t0)


class _Relay:
    """Passes the run's worker events on to the driver's agent as they arrive (its answer is not
    awaited: the driver reads the file the agent writes)."""

    def __init__(self, agents: Agents, run_id: str, driver: str):
        self.agents, self.run_id, self.driver = agents, run_id, driver
        self.sent = 0

    def __call__(self) -> None:
        new = self.agents.events(self.run_id)[self.sent :]
        if new:
            try:
                self.agents[self.driver].request("tell", run_id=self.run_id, events=new)
            except AgentLost:  # the drive's own wait says so
                return
            self.sent += len(new)

    def events(self) -> tuple[dict, ...]:
        return tuple(self.agents.events(self.run_id))


def finish_and_collect(
    agents: Agents,
    run_id: str,
    hosts: list[str],
    driver: str,
    grace: float,
    clock_port: int,
    keep: dict[str, bool],
    art_dir: Path,
) -> StepResult:
    """``finish`` on every host together (stop, reset on the driver host, facts, pack); each pack
    comes back as soon as its host finished: moved from where it is for a local host, streamed by
    the agent otherwise. Every wait is bounded."""
    t0 = time.monotonic()
    lost = agents.start(hosts)  # a host that lost its agent still gets its run's processes stopped
    failures = [
        Failure(h, FINISH_TASK, f"cannot reach the cmx agent: {why}", unreachable=True) for h, why in lost.items()
    ]
    reports: dict[str, dict] = {}

    def one(host: str) -> list[Failure]:
        agent = agents[host]
        target = art_dir / f"{host}.tgz"
        remote = not agent.conn.local  # its pack streams back with the finish's answer: one round trip
        try:
            pending = agent.request(
                "finish",
                dest=target if remote else None,
                run_id=run_id,
                grace=grace,
                reset=host == driver,
                clock_port=clock_port,
                keep=keep.get(host, False),
                send_pack=remote,
            )
            report = wait(pending, 600)
        except (AgentLost, TimeoutError) as exc:
            return [_lost(host, FINISH_TASK, exc)]
        reports[host] = {k: v for k, v in report.items() if k != "bytes"}
        if not report.get("ok") or report.get("rc"):
            why = "; ".join(report.get("errors") or []) or report.get("error") or "failed"
            return [Failure(host, FINISH_TASK, why)]
        found = [Failure(host, FINISH_TASK, line) for line in report.get("errors") or []]
        if remote:
            if pending.write_error:  # a full or read-only results disk
                found.append(Failure(host, FETCH_TASK, pending.write_error))
            elif not report.get("bytes"):
                found.append(Failure(host, FETCH_TASK, "the host's finish sent no pack"))
            return found
        try:
            shutil.move(report["pack"], target)
        except OSError as exc:  # a full or read-only results disk
            found.append(Failure(host, FETCH_TASK, f"writing {target} failed: {exc.strerror or exc}"))
        return found

    with ThreadPoolExecutor(max_workers=max(len(hosts), 1)) as pool:
        for found in pool.map(one, [h for h in hosts if h not in lost]):
            failures += found
    status = "failed" if failures else "successful"
    return StepResult(status, tuple(failures), time.monotonic() - t0, {}, reports)


def start_drive_stages(started: StepResult) -> dict[str, float]:
    """start (until the drive began) and drive."""
    at = started.marks.get("drive", started.seconds)
    return {"start": round(at, 3), "drive": round(started.seconds - at, 3)}


def stop_collect_stages(stopped: StepResult) -> dict[str, float]:
    """stop (until the slowest host had stopped its processes, as its finish reported) and
    collect (the rest: reset, facts, pack, fetch)."""
    stop_s = max([float((r.get("seconds") or {}).get("stop", 0.0)) for r in stopped.reports.values()] or [0.0])
    at = min(stop_s, stopped.seconds)
    return {"stop": round(at, 3), "collect": round(stopped.seconds - at, 3)}


def record_harness_overhead(con, run_id: str, wall_s: float) -> float:
    """Store and return the run's wall time minus the time its tasks were in flight (first sent
    to last finished, on the controller's clock: ``task_times``): what the harness cost this run."""
    (in_flight,) = con.execute(
        "SELECT max(finished_at) - min(sent_at) FROM task_times WHERE run_id = ?", [run_id]
    ).fetchone()
    value = max(wall_s - (in_flight or 0.0), 0.0)
    con.execute("INSERT INTO metrics VALUES (?, 'harness_overhead_s', ?, 's')", [run_id, value])
    return value


def finish_reports(stopped: StepResult) -> dict[str, dict]:
    """What each host's finish said it did (its steps' seconds, what failed), for run.json."""
    return {h: {k: r.get(k) for k in ("seconds", "failed", "pack")} for h, r in stopped.reports.items()}


def unpack_artifacts(art_dir: Path) -> tuple[set[str], str | None]:
    """Unpack each host's pack (``<host>.tgz``) in ``art_dir`` beside it: the hosts whose records are
    all here, and why collecting failed (a full or read-only results disk: the run fails saying so)."""
    collected: set[str] = set()
    error = None
    for tgz in sorted(art_dir.glob("*.tgz")):
        try:
            with tarfile.open(tgz) as tar:
                tar.extractall(art_dir / tgz.name.removesuffix(".tgz"), filter="data")
            tgz.unlink()
            collected.add(tgz.name.removesuffix(".tgz"))
        except (OSError, tarfile.TarError) as exc:
            error = error or f"collecting the artifacts into {art_dir} failed: {getattr(exc, 'strerror', None) or exc}"
    return collected, error

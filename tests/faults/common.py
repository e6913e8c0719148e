"""What the fault tests share: `cmx run` in the background as a user starts it, a fault injected
once a run is under way, and the checks every fault ends with (the database opens, nothing stored
before is lost, the accounting adds up, no process of the run is left)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from cmx.engine.results import db as results_db
from tests.conftest import CMX, REPO, query, run_processes
from tests.results_fixture import add_run


def cmx_run(exp: Path, db: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [*CMX, "run", str(exp), "--db", str(db), *args],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_killed_when(
    exp: Path,
    inv: Path,
    db: Path,
    struck: Callable[[], bool],
    bound: float = 600,
    what: str = "the fault struck",
    after: float = 0.0,
) -> None:
    """`cmx run` SIGKILLed (a killed controller) once ``struck()`` says ``what`` happened, ``after``
    seconds later; it fails the test when the sweep ends first or ``bound`` seconds pass."""
    proc = subprocess.Popen(
        [*CMX, "run", str(exp), "--inventory", str(inv), "--db", str(db)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + bound
        while not struck():
            assert proc.poll() is None, f"cmx run ended ({proc.returncode}) before {what}"
            assert time.monotonic() < deadline, f"never: {what}"
            time.sleep(0.02)
        time.sleep(after)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)


def finish(proc: subprocess.Popen, timeout: float = 900) -> tuple[str, str]:
    """Wait for `cmx run` like its user: its output; a sweep that hangs past ``timeout`` is
    stopped (SIGTERM, then SIGKILL) and fails the test."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError(f"`cmx run` still running after {timeout:g}s: {out[-2000:]} {err[-2000:]}") from None


def seed(db: Path, experiment: str) -> list[tuple]:
    """One run already stored (as an earlier sweep would have left it), to check it survives."""
    db.parent.mkdir(parents=True, exist_ok=True)
    with results_db.connect(db) as con:
        add_run(
            con,
            experiment,
            f"earlier-{experiment}",
            {"pool": "solo"},
            metrics={"consume_rate": 123.0},
            tasks=[(f"t{i}", 1.0 + i, 2.0 + i, 3.0 + i, "SUCCESS") for i in range(5)],
        )
    return stored(db, experiment)


def stored(db: Path, experiment: str) -> list[tuple]:
    """The seeded run's row and its tasks: what must be there, unchanged, after the fault."""
    return query(
        db,
        """SELECT r.run_id, r.status, count(t.task_id) FROM runs r LEFT JOIN tasks t USING (run_id)
                        WHERE r.experiment = ? AND r.run_id = ? GROUP BY ALL""",
        [experiment, f"earlier-{experiment}"],
    )


class Fault(threading.Thread):
    """Waits until the driver of the sweep's first run has every worker's configuration (the
    file ``worker_config.json`` in its run dir on ``driver_dir``: the workers are about to
    consume), then ``delay`` s later calls ``inject(run_id)`` once. ``at`` is when it did."""

    def __init__(
        self,
        driver_dir: Path,
        delay: float,
        inject: Callable[[str], None],
        timeout: float = 600,
        which: Callable[[Path], bool] = lambda run_dir: True,
    ):
        super().__init__(daemon=True)
        self.which = which  # of the runs, the one to hit (given its run dir on the driver host)
        self.driver_dir, self.delay, self.inject, self.timeout = driver_dir, delay, inject, timeout
        self.run_id: str | None = None
        self.at: float | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()

    def finish(self, timeout: float = 120) -> None:
        """The sweep ended: stop waiting for a run, and let a fault under way complete."""
        self._done.set()
        self.join(timeout)

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while time.monotonic() < deadline and not self._done.is_set():
                for checked in (self.driver_dir / "runs").glob("*/worker_config.json"):
                    if not self.which(checked.parent):
                        continue
                    time.sleep(self.delay)
                    self.run_id = checked.parent.name
                    self.at = time.time()
                    self.inject(self.run_id)
                    return
                time.sleep(0.1)
        except BaseException as exc:  # said by the test, not lost in a thread
            self.error = exc


def tasks_of(run_dir: Path) -> int | None:
    """The ``tasks`` param of the run whose run dir this is (from its spec.json)."""
    import json

    try:
        return json.loads((run_dir / "spec.json").read_text())["params"].get("tasks")
    except (OSError, ValueError, KeyError):
        return None


def metrics(db: Path, run_id: str) -> dict[str, float]:
    return dict(query(db, "SELECT name, value FROM metrics WHERE run_id = ?", [run_id]))


def assert_accounting(db: Path, run_id: str) -> dict[str, float]:
    """published = completed + lost + unseen, each as the tasks table says (no task counted twice);
    lost is unknown (NULL) when some tasks are unseen (a host's records were not collected). A run
    that did not end ok stopped before its unexecuted tasks: they are tasks_not_run, and lost is
    unknown (NULL) when there are any (issue 43)."""
    m = metrics(db, run_id)
    ((status,),) = query(db, "SELECT status FROM runs WHERE run_id = ?", [run_id])
    ((published, completed, lost, unseen),) = query(
        db,
        """
        SELECT count(DISTINCT task_id) FILTER (WHERE sent_at IS NOT NULL),
               count(DISTINCT task_id) FILTER (WHERE state NOT IN ('LOST', 'UNSEEN')),
               count(*) FILTER (WHERE state = 'LOST'), count(*) FILTER (WHERE state = 'UNSEEN')
        FROM tasks WHERE run_id = ?""",
        [run_id],
    )
    assert not (lost and unseen), (lost, unseen)  # one run's unrun tasks are all one or the other
    assert (m["tasks_published"], m["tasks_completed"], m["tasks_unseen"]) == (published, completed, unseen), m
    if status != "ok" and not unseen:
        assert m["tasks_not_run"] == lost and m["tasks_lost"] == (None if lost else 0), m
    else:
        assert m["tasks_lost"] == (None if unseen else lost) and "tasks_not_run" not in m, m
    assert m["tasks_published"] == m["tasks_completed"] + lost + unseen, m
    return m


def assert_no_traceback(proc_out: str, proc_err: str) -> None:
    assert "Traceback" not in proc_out + proc_err, (proc_out + proc_err)[-3000:]


def assert_nothing_left(db: Path, wait_s: float = 5.0) -> None:
    """No worker, sampler or driver of the sweep's runs is alive on this machine."""
    deadline = time.monotonic() + wait_s
    while (left := run_processes(db)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, [" ".join(p.cmdline()) for p in left if p.is_running()]


def cmx_status(db: Path) -> str:
    """What `cmx status` tells the user (it must open the database and exit 0)."""
    from tests.conftest import cmx

    proc = cmx("status", "--db", str(db), timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout + proc.stderr


def two_hosts(tmp_path: Path, workers: tuple[str, ...], w2_vars: str = "") -> tuple[Path, Path]:
    """An inventory where this machine plays w1 (driver, and the broker: its Redis and RabbitMQ) and w2,
    each with a work dir of its own under ``tmp_path/hosts``; ``workers`` are the worker hosts,
    ``w2_vars`` more of w2's variables (``k: v, ...``). Returns (inventory, hosts dir)."""
    from tests.conftest import write

    from tests.hostseed import seed

    hosts = tmp_path / "hosts"
    seed([hosts / "w1", hosts / "w2"], sys.executable)  # provisioned already: the subject is the fault
    extra = f", {w2_vars}" if w2_vars else ""
    inv = write(
        tmp_path / "inv.yml",
        f"""
        all:
          vars:
            ansible_connection: local
            ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"
            python_env_interpreter: "{{{{ ansible_playbook_python }}}}"
          hosts:
            w1: {{cmx_workdir: {hosts}/w1}}
            w2: {{cmx_workdir: {hosts}/w2{extra}}}
          children:
            brokers: {{hosts: {{w1: {{broker_url: ["redis://127.0.0.1:6379/0",
                                                   "amqp://guest:guest@127.0.0.1:5672//"]}}}}}}
            drivers: {{hosts: {{w1: }}}}
            workers: {{hosts: {{{", ".join(f"{w}: " for w in workers)}}}}}
    """,
    )
    return inv, hosts

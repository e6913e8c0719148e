"""The user's own Celery tasks through the `tasks` workload, proven by what the tasks themselves did.

The tasks module lives in a temporary folder outside the repository, uses `shared_task` and
imports nothing from cmx. Each call appends one line (its task id, args, host, pid and the file it
was imported from) to a file in a folder passed in its args: those lines, not cmx's own stamps,
show that every task ran on the run's workers exactly once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, cmx, query, write

pytestmark = pytest.mark.integration

TASKS = 60

#: A user's tasks module: plain Celery, nothing from cmx.
MODULE = '''
import json
import os

from celery import shared_task


@shared_task(bind=True)
def record(self, folder, n):
    line = json.dumps({"id": self.request.id, "args": [folder, n], "host": os.environ.get("CMX_HOST"),
                       "pid": os.getpid(), "file": __file__, "total": sum(range(n))})
    with open(os.path.join(folder, "calls.jsonl"), "a") as out:
        out.write(line + "\\n")
    return n


@shared_task
def boom(folder, n):
    raise ValueError(f"boom {n} from the user's own task")
'''


def side_effects(folder: Path) -> list[dict]:
    path = folder / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def user_project(root: Path) -> tuple[Path, Path]:
    """The user's folder (experiment beside its tasks module) and the side-effect folder."""
    project, calls = root / "project", root / "calls"
    for pool in ("prefork", "threads"):
        (calls / pool).mkdir(parents=True)
    (calls / "boom").mkdir()
    write(project / "usertasks.py", MODULE)
    return project, calls


def test_user_tasks_run_on_the_workers_exactly_once_each(tmp_path):
    assert not tmp_path.is_relative_to(REPO)
    project, calls = user_project(tmp_path)
    exp = write(
        project / "mine.yaml",
        f"""
        name: user-tasks
        workload:
          name: tasks
          params:
            module: usertasks.py
            task: usertasks.record
            tasks: {TASKS}
            mode: backlog
        fixed: {{broker: redis, concurrency: 2}}
        zip:
          - {{pool: [prefork, threads], params.args: [["{calls}/prefork", 500], ["{calls}/threads", 500]]}}
        include:
          - {{pool: threads, params.task: usertasks.boom, params.args: ["{calls}/boom", 7], params.tasks: 5}}
        limits: {{run_timeout: 2m}}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # the boom run failed

    for pool in ("prefork", "threads"):
        run_id, status, error = query(
            db, "SELECT run_id, status, error FROM runs WHERE pool = ? AND \"params.task\" = 'usertasks.record'", [pool]
        )[0]
        assert status == "ok", error
        lines = side_effects(calls / pool)
        ids = [line["id"] for line in lines]
        # every task the driver published ran once, and nothing else ran
        published = {
            t for (t,) in query(db, "SELECT task_id FROM tasks WHERE run_id = ? AND sent_at IS NOT NULL", [run_id])
        }
        assert len(published) == TASKS and len(ids) == TASKS and set(ids) == published, (pool, len(ids))
        assert all(line["args"] == [str(calls / pool), 500] and line["total"] == sum(range(500)) for line in lines)
        # ...in the run's worker processes (the pids cmx stamped), from the module cmx shipped
        worker_pids = {
            p
            for (p,) in query(
                db, "SELECT DISTINCT pid FROM tasks WHERE run_id = ? AND started_at IS NOT NULL", [run_id]
            )
        }
        assert {line["pid"] for line in lines} == worker_pids
        assert {line["host"] for line in lines} == {"localhost"}
        shipped = {Path(line["file"]) for line in lines}
        assert len(shipped) == 1 and next(iter(shipped)).parent.name == "cmx_user", shipped
        assert not next(iter(shipped)).is_relative_to(project)
        # full per-task instrumentation for a task cmx did not define
        stamped = query(
            db,
            """SELECT count(*), count(received_at), count(started_at), count(finished_at),
                                      count(*) FILTER (WHERE state = 'SUCCESS'), min(name), max(name)
                               FROM tasks WHERE run_id = ?""",
            [run_id],
        )[0]
        assert stamped == (TASKS, TASKS, TASKS, TASKS, TASKS, "usertasks.record", "usertasks.record"), stamped
        metrics = dict(query(db, "SELECT name, value FROM metrics WHERE run_id = ?", [run_id]))
        assert metrics["tasks_completed"] == TASKS and metrics["tasks_failed"] == 0 and metrics["consume_rate"] > 0

    # A task that raises: counted, the run fails, and the first traceback is kept with the run.
    run_id, status, error = query(
        db, "SELECT run_id, status, error FROM runs WHERE \"params.task\" = 'usertasks.boom'"
    )[0]
    assert status == "failed" and "5 task(s) raised" in error and "ValueError: boom 7" in error, error
    assert dict(query(db, "SELECT name, value FROM metrics WHERE run_id = ?", [run_id]))["tasks_failed"] == 5
    kept = list((db.parent / "artifacts" / run_id).glob("*/task-failure-*.txt"))
    assert kept and "raise ValueError" in kept[0].read_text() and "usertasks.py" in kept[0].read_text()


def test_validate_names_a_missing_module_and_an_unknown_task(tmp_path):
    project, calls = user_project(tmp_path)
    exp = write(
        project / "bad.yaml",
        """
        name: bad-user-tasks
        workload:
          name: tasks
          params: {module: usertasks.py, task: usertasks.record, args: [x, 1]}
        matrix:
          params.task: [usertasks.record, usertasks.nope]
    """,
    )
    proc = cmx("validate", str(exp))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"{exp}:6:35: params.task: importing your code failed: KeyError: no task registered as "
        "'usertasks.nope' (registered: usertasks.boom, usertasks.record)"
    ], proc.stderr
    exp.write_text(exp.read_text().replace("module: usertasks.py", "module: missing.py"))
    proc = cmx("validate", str(exp))
    assert proc.returncode == 2 and proc.stderr.startswith(f"{exp}:4:20: params.module: no missing.py"), proc.stderr
    (project / "broken.py").write_text("import json\n\nraise RuntimeError('not importable')\n")
    exp.write_text(exp.read_text().replace("module: missing.py", "module: broken.py"))
    proc = cmx("validate", str(exp))
    assert proc.returncode == 2 and "RuntimeError: not importable" in proc.stderr, proc.stderr
    assert f"{project / 'broken.py'}:3" in proc.stderr, proc.stderr


def test_a_task_that_sets_its_own_option_against_the_cell_fails_its_run(tmp_path):
    """`@shared_task(acks_late=False)` runs without late acks whatever `celery.task_acks_late`
    says: the run fails naming the task, the setting and both values, rather than record `true`.
    The same task without its own option runs, and each task's value is stored per task; on a pool
    that drops time limits (threads) it runs without the cell's `task_time_limit`, and fails so."""
    project = tmp_path / "project"
    write(
        project / "early.py",
        "from celery import shared_task\n\n\n@shared_task(acks_late=False)\ndef work(n):\n    return n\n",
    )
    write(project / "plain.py", "from celery import shared_task\n\n\n@shared_task\ndef work(n):\n    return n\n")
    exp = write(
        project / "acks.yaml",
        """
        name: own-task-options
        workload: {name: tasks, params: {module: early.py, task: early.work, args: [1], tasks: 20}}
        fixed: {broker: redis, pool: prefork, concurrency: 1, celery.task_acks_late: true, celery.task_time_limit: 60}
        zip:
          - {params.module: [early.py, plain.py], params.task: [early.work, plain.work]}
        include:  # threads hands no time limit to where it acts: the task runs without one
          - {params.module: plain.py, params.task: plain.work, pool: threads}
        limits: {run_timeout: 2m}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # the early run failed
    runs = {
        (task, pool): (run_id, status, error)
        for run_id, task, pool, status, error in query(
            db, 'SELECT run_id, "params.task", pool, status, error FROM runs'
        )
    }

    def stored(run_id: str) -> dict:
        return {
            key: json.loads(value)
            for key, value in query(
                db, "SELECT key, value FROM worker_config WHERE run_id = ? AND key LIKE 'task.%'", [run_id]
            )
        }

    run_id, status, error = runs["early.work", "prefork"]
    assert status == "failed", error
    assert "cell asks celery.task_acks_late True; task early.work runs False" in error, error
    assert stored(run_id) == {"task.early.work.task_acks_late": False, "task.early.work.task_time_limit": 60}

    run_id, status, error = runs["plain.work", "prefork"]
    assert status == "ok", error
    assert stored(run_id) == {"task.plain.work.task_acks_late": True, "task.plain.work.task_time_limit": 60}
    assert dict(query(db, "SELECT name, value FROM metrics WHERE run_id = ?", [run_id]))["tasks_completed"] == 20

    run_id, status, error = runs["plain.work", "threads"]
    assert status == "failed" and "cell asks celery.task_time_limit 60; task plain.work runs None" in error, error
    assert "task_acks_late" not in error, error

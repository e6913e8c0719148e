"""The user's own Celery app (its settings kept, the harness's overridden and recorded) and the
user's own workload class from a file: the example of docs/howto/own-tasks.md, run exactly as printed
there (tests/unit/test_docs_blocks.py validates it; this runs it)."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REPO, cmx, query, write

pytestmark = pytest.mark.integration


#: The page whose example this runs.
DOC = "docs/howto/own-tasks.md"


def doc_block(marker: str) -> str:
    """The fenced block of DOC whose first line is ``# <marker>``."""
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", (REPO / DOC).read_text(), re.S):
        if body.startswith(f"# {marker}\n"):
            return body
    raise AssertionError(f"{DOC} has no block starting with '# {marker}'")


def test_the_documented_workload_class_runs_end_to_end(tmp_path):
    write(tmp_path / "experiments" / "my_workload.py", doc_block("experiments/my_workload.py"))
    exp = write(tmp_path / "experiments" / "chains.yaml", doc_block("experiments/chains.yaml"))
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = query(
        db,
        """SELECT r.pool, r.workload, count(*), count(DISTINCT t.task_id), min(t.name), max(t.name),
                               count(*) FILTER (WHERE t.state = 'SUCCESS')
                        FROM runs r JOIN tasks t USING (run_id) GROUP BY ALL ORDER BY ALL""",
    )
    # 20 chains of 3: the driver published 20 first steps, the workers the 40 next ones
    assert rows == [
        ("prefork", "./my_workload.py:Chains", 60, 60, "chains.step", "chains.step", 60),
        ("threads", "./my_workload.py:Chains", 60, 60, "chains.step", "chains.step", 60),
    ], rows
    published_by = query(
        db,
        """SELECT count(*) FILTER (WHERE name = 'chain_steps' AND value = 60),
                                       count(*) FILTER (WHERE name = 'tasks_completed' AND value = 60)
                                FROM metrics""",
    )
    assert published_by == [(2, 2)]


def test_validate_says_why_a_workload_class_does_not_load(tmp_path):
    write(tmp_path / "w.py", "class NotAWorkload:\n    pass\n")
    exp = write(tmp_path / "bad.yaml", "name: bad\nworkload: {name: ./w.py:NotAWorkload}\n")
    proc = cmx("validate", str(exp))
    assert proc.returncode == 2
    assert (
        proc.stderr.strip() == f"{exp}:2:18: workload ./w.py:NotAWorkload is not a subclass of "
        "cmx.workloads.catalog.base.Workload"
    ), proc.stderr
    exp.write_text("name: bad\nworkload: {name: ./nope.py:Chains}\n")
    proc = cmx("validate", str(exp))
    assert proc.returncode == 2 and "cannot load workload ./nope.py:Chains: FileNotFoundError" in proc.stderr


APP = '''
from celery import Celery

app = Celery("userproj", broker="redis://:hunter2@10.255.255.1:6390/5")
app.conf.update(task_time_limit=30, worker_prefetch_multiplier=16, task_default_queue="images",
                task_routes={"userproj.tasks.*": {"queue": "images"}})
app.autodiscover_tasks(["userproj"])
'''

TASKS = '''
import json
import os

from userproj.celery import app


@app.task(bind=True)
def add(self, folder, x, y):
    conf = self.app.conf
    with open(os.path.join(folder, "calls.jsonl"), "a") as out:
        out.write(json.dumps({"id": self.request.id, "app": self.app.main, "time_limit": conf.task_time_limit,
                              "prefetch": conf.worker_prefetch_multiplier,
                              "queue": self.request.delivery_info.get("routing_key")}) + "\\n")
    return x + y
'''


def test_the_users_own_app_keeps_its_settings_except_the_harness_ones(tmp_path):
    project, calls = tmp_path / "project", tmp_path / "calls"
    calls.mkdir()
    write(project / "userproj" / "__init__.py", "")
    write(project / "userproj" / "celery.py", APP)
    write(project / "userproj" / "tasks.py", TASKS)
    exp = write(
        project / "app.yaml",
        f"""
        name: user-app
        workload:
          name: tasks
          params: {{module: userproj, app: "userproj.celery:app", task: userproj.tasks.add,
                    args: ["{calls}", 1, 2], tasks: 20}}
        fixed: {{pool: threads, broker: redis, prefetch_multiplier: 2}}
        limits: {{run_timeout: 1m}}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_id,) = query(db, "SELECT run_id FROM runs")[0]
    lines = [json.loads(line) for line in (calls / "calls.jsonl").read_text().splitlines()]
    published = {t for (t,) in query(db, "SELECT task_id FROM tasks WHERE sent_at IS NOT NULL")}
    assert len(lines) == 20 and {line["id"] for line in lines} == published
    # the user's app ran, with their own setting, the cell's prefetch and the run's queue
    assert {(line["app"], line["time_limit"], line["prefetch"], line["queue"]) for line in lines} == {
        ("userproj", 30, 2, f"cmx.{run_id}")
    }
    record = json.loads(next((db.parent / "artifacts" / run_id).glob("*/app-config.json")).read_text())
    assert record["settings"]["task_time_limit"] == 30
    over = record["overridden"]
    assert over["worker_prefetch_multiplier"] == {"yours": 16, "run": 2}
    assert over["task_default_queue"] == {"yours": "images", "run": f"cmx.{run_id}"}
    assert over["task_routes"]["run"] is None and "10.255.255.1" in over["broker_url"]["yours"]
    assert "hunter2" not in json.dumps(record)

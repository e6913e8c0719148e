"""The user's own tasks over real SSH: a package folder shipped to a worker host in a network
namespace (tests/nethosts.py), imported there, and run there, shown by the tasks' own side effects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cmx, query, write
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("nethosts_can_be_made")]

TASKS = 40

JOBS = '''
import json
import os

from celery import shared_task

from userpkg.helpers import weight


@shared_task(bind=True)
def record(self, folder, n):
    line = json.dumps({"id": self.request.id, "host": os.environ.get("CMX_HOST"), "file": __file__,
                       "weight": weight(n)})
    with open(os.path.join(folder, "calls.jsonl"), "a") as out:
        out.write(line + "\\n")
'''


def test_a_user_package_is_shipped_over_ssh_and_runs_on_the_worker_host(tmp_path):
    project, calls = tmp_path / "project", tmp_path / "calls"
    calls.mkdir()
    calls.chmod(0o777)
    write(project / "userpkg" / "__init__.py", "")
    write(project / "userpkg" / "helpers.py", "def weight(n):\n    return 3 * n\n")
    write(project / "userpkg" / "jobs.py", JOBS)
    exp = write(
        project / "remote.yaml",
        f"""
        name: user-tasks-remote
        workload:
          name: tasks
          params: {{module: userpkg, task: userpkg.jobs.record, args: ["{calls}", 5], tasks: {TASKS}}}
        fixed: {{broker: redis, pool: threads, concurrency: 2}}
        limits: {{run_timeout: 2m}}
    """,
    )
    with NetHosts(tmp_path / "net", 2) as net:
        inv = net.inventory(
            tmp_path / "lab.yml",
            {"brokers": ["h1"], "drivers": ["h1"], "workers": ["h2"]},
            workdir_root=tmp_path / "hosts",
            seeded=True,
        )
        db = tmp_path / "results" / "cmx.duckdb"
        proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [json.loads(line) for line in (calls / "calls.jsonl").read_text().splitlines()]
    published = {t for (t,) in query(db, "SELECT task_id FROM tasks WHERE sent_at IS NOT NULL")}
    assert len(published) == TASKS and sorted(line["id"] for line in lines) == sorted(published)
    assert {line["host"] for line in lines} == {"h2"} and {line["weight"] for line in lines} == {15}
    # imported from what cmx shipped to h2's work dir, not from the user's folder
    files = {Path(line["file"]) for line in lines}
    assert len(files) == 1
    shipped = next(iter(files))
    assert shipped.is_relative_to(tmp_path / "hosts" / "h2" / "lib") and shipped.parts[-3:] == (
        "cmx_user",
        "userpkg",
        "jobs.py",
    ), shipped
    assert query(db, "SELECT DISTINCT host FROM tasks WHERE started_at IS NOT NULL") == [("h2",)]

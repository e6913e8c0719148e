"""`cmx init` writes an experiment and tasks module that run as they are; `--smoke` runs each cell
once, tiny, into results/smoke.duckdb; `--tag/--note` are stored and `cmx status --tag` selects."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, cmx, query

pytestmark = pytest.mark.integration


def test_init_then_smoke_run_with_tags(tmp_path):
    made = cmx("init", "demo", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    exp, tasks = tmp_path / "experiments" / "demo.yaml", tmp_path / "experiments" / "demo_tasks.py"
    assert exp.is_file() and "from celery import shared_task" in tasks.read_text()
    assert "import cmx" not in tasks.read_text() and "workloads" not in tasks.read_text()
    again = cmx("init", "demo", cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr

    inventory = str(REPO / "inventory" / "local.yml")
    assert cmx("validate", "experiments/demo.yaml", "--inventory", inventory, cwd=tmp_path).returncode == 0
    proc = cmx(
        "run",
        "experiments/demo.yaml",
        "--smoke",
        "--inventory",
        inventory,
        "--tag",
        "commit=abc123",
        "--tag",
        "env=ci",
        "--note",
        "first try",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    db = tmp_path / "results" / "smoke.duckdb"
    assert db.exists() and not (tmp_path / "results" / "cmx.duckdb").exists()
    # every cell of the experiment (2 pools x 2 concurrencies), once, shrunk to 5 calls of its task
    rows = query(
        db,
        """SELECT pool, concurrency, "params.tasks", repeat, status, count(t.task_id),
                               count(*) FILTER (WHERE t.state = 'SUCCESS'), min(t.name)
                        FROM runs r JOIN tasks t USING (run_id) GROUP BY ALL ORDER BY ALL""",
    )
    assert rows == [(pool, c, 5, 1, "ok", 5, 5, "demo_tasks.work") for pool in ("prefork", "threads") for c in (1, 2)]
    assert query(db, "SELECT tags ->> 'commit', tags ->> 'env', note FROM sweeps") == [("abc123", "ci", "first try")]

    tagged = cmx("status", "--db", str(db), "--tag", "commit=abc123", cwd=tmp_path)
    assert tagged.returncode == 0 and "demo" in tagged.stdout and "4" in tagged.stdout, tagged.stdout
    other = cmx("status", "--db", str(db), "--tag", "commit=zzz", cwd=tmp_path)
    assert other.returncode == 0 and "demo" not in other.stdout and "no runs of sweeps tagged" in other.stdout

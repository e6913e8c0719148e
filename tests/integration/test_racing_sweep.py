"""Racing repeats end to end (issues 38, 50), with real workers on this machine's Redis: two cells of
clearly different throughput (one thread against eight, on sleeping tasks) race on consume_rate;
the race is decided for eight threads with fewer runs than the fixed sweep's cells × max (at its
first look: 8× is far worse); the sweep is finished (a new `cmx run` measures a new point, it does
not resume it). A budget (limits.max_runs) ends a race cleanly, undecided, and says why. A race of
three pools: its last line, `cmx recommend` and the report's "Which configuration?" give one answer."""

from __future__ import annotations

import pytest

from cmx.analysis import views
from cmx.engine.results import db as results_db
from tests.conftest import cmx, query, write

pytestmark = pytest.mark.integration

EXPERIMENT = """
    name: {name}
    repeats: {{min: 3, max: 6}}
    objective: {{maximize: consume_rate}}
    workload: {{name: concurrent_sleep, params: {{tasks: 16, sleep_s: 0.1}}}}
    fixed: {{broker: redis, backend: none, pool: threads, prefetch_multiplier: 1}}
    matrix: {{concurrency: [1, 8]}}
    limits: {{run_timeout: 1m{budget}}}
"""


def _decided_from_fewer_runs(db, out: str) -> None:
    """What a decided race leaves: the winner said, fewer runs than cells × max, an ended (finished)
    sweep that a new `cmx run` does not resume, and `cmx recommend` naming the winner."""
    assert "race: decided on maximize consume_rate: concurrency=8 is the best" in out, out[-2000:]
    runs = dict(query(db, "SELECT concurrency, count(DISTINCT repeat) FROM runs WHERE status = 'ok' GROUP BY ALL"))
    assert runs[8] >= 3 and runs[1] >= 3 and sum(runs.values()) < 2 * 6, runs  # decided before max
    assert query(db, "SELECT how FROM sweep_ends") == [("decided",)]
    with views.connect(db, read_only=True) as con:
        revision = con.execute("SELECT max(revision) FROM runs").fetchone()[0]
        assert results_db.resume_point(con, "race", revision) == (None, set())  # finished: a new run is a new point
    rec = cmx("recommend", "race", "--db", str(db))
    assert rec.returncode == 0 and "Run concurrency 8" in rec.stdout, rec.stdout + rec.stderr


@pytest.mark.slow  # the same race uninterrupted: test_an_interrupted_race_resumes_where_it_stopped checks all of it
def test_a_race_is_decided_from_fewer_runs(tmp_path):
    exp = write(tmp_path / "race.yaml", EXPERIMENT.format(name="race", budget=""))
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "shows: a race from 3 to 6 runs a cell" in proc.stdout
    _decided_from_fewer_runs(db, proc.stdout)


def test_a_budget_ends_a_race_undecided_and_says_why(tmp_path):
    exp = write(tmp_path / "budget.yaml", EXPERIMENT.format(name="budget", budget=", max_runs: 2"))
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert query(db, "SELECT count(*) FROM runs") == [(2,)]
    assert "race: undecided on maximize consume_rate: the budget limits.max_runs (2 runs) was reached" in proc.stdout, (
        proc.stdout[-2000:]
    )


def test_an_interrupted_race_resumes_where_it_stopped(tmp_path):
    import os
    import signal
    import subprocess
    import time

    from tests.conftest import CMX, REPO

    exp = write(tmp_path / "race.yaml", EXPERIMENT.format(name="race", budget=""))
    db = tmp_path / "results" / "cmx.duckdb"
    proc = subprocess.Popen(
        [*CMX, "run", str(exp), "--db", str(db)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    artifacts, deadline = db.parent / "artifacts", time.monotonic() + 300
    # Ctrl-C inside the first min rounds: 8 threads against 1 is decided at the first look (3 runs a cell)
    while time.monotonic() < deadline:
        if artifacts.exists() and len([d for d in artifacts.glob("*") if d.is_dir()]) >= 4:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the race never got to its second round")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "shows: a race from 3 to 6 runs a cell" in out, out[-2000:]
    assert query(db, "SELECT count(*) FROM sweep_ends") == [(0,)]  # interrupted: not ended, resumable
    again = cmx("run", str(exp), "--db", str(db), timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "already stored as ok are skipped" in again.stdout and "race: decided" in again.stdout, again.stdout[-2000:]
    ok = query(db, "SELECT concurrency, repeat FROM runs WHERE status = 'ok' ORDER BY ALL")
    assert len(ok) == len(set(ok)) and len(ok) < 12, ok  # no repeat run twice; decided before max
    assert query(db, "SELECT count(DISTINCT coalesce(resumes, sweep_id)) FROM sweeps") == [(1,)]  # one point
    _decided_from_fewer_runs(db, again.stdout)


POOLS = """
    name: pools
    repeats: {min: 3, max: 4}
    objective: {maximize: consume_rate}
    workload: {name: concurrent_sleep, params: {tasks: 16, sleep_s: 0.05}}
    fixed: {broker: redis, backend: none, concurrency: 4, prefetch_multiplier: 1}
    matrix: {pool: [prefork, threads, gevent]}
    limits: {run_timeout: 1m}
"""


def test_a_race_recommend_and_the_report_give_one_answer(tmp_path):
    """Three pools at concurrency 4 on sleeping tasks (close: whatever the race finds): the best, the
    cells tied with it and the words about them, the runs a cell that would decide them, are the
    same in the race's last line, `cmx recommend` (json, its answer) and the report."""
    import html
    import json

    exp = write(tmp_path / "pools.yaml", POOLS)
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("race: "))
    rec = cmx("recommend", "pools", "--db", str(db), "--format", "json")
    assert rec.returncode == 0, rec.stderr
    got = json.loads(rec.stdout)
    ranking = [r for r in got["ranking"] if r["rank"] is not None]
    best = ranking[0]["values"]["pool"]
    tied = {r["values"]["pool"] for r in ranking[1:] if r["tied_with_best"]}
    assert f"pool={best}" in line, (line, got["answer"])
    for pool in {"prefork", "threads", "gevent"} - {best}:
        assert (f"pool={pool}" in line) == (pool in tied), (pool, line, got["answer"])  # the same tied set
    said = [a for a in got["answer"] if a.startswith("Tied with it: ")]
    if tied:  # the same words: "1 cell is not told apart from it", "… would take N runs a cell …: raise max to N"
        words = said[0].removeprefix("Tied with it: ").removesuffix(".").split("; ")
        assert words[0].split(": ")[0] in line, (line, said)
        assert "would take" not in words[-1] or line.endswith(words[-1]), (line, said)
    else:
        assert "race: decided" in line and not said, (line, got["answer"])
    out = tmp_path / "report"
    report = cmx("report", "pools", "--db", str(db), "--out", str(out), timeout=600)
    assert report.returncode == 0, report.stderr[-2000:]
    page = html.unescape((out / "index.html").read_text())
    for answer in got["answer"]:
        assert answer in page, (answer, page[page.find("Which configuration") :][:2000])

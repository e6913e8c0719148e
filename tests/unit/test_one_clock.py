"""One clock for every stamp (issue 24): the tables keep each stamp on its own host's clock, and
everything that reads one reads it through engine/results/sql/task_times.sql, on the controller's.

A run where the worker's clock is 30 s ahead of the controller's (the driver's is right) must give
the harness overhead, the rate search, the rate over time and the memory views of the same run
with both clocks right; and no SQL or Python outside task_times.sql may read a stamp of `tasks`
straight from the table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import duckdb
import pytest

from cmx.analysis import views
from cmx.engine.plan import ratesearch
from cmx.engine.run.runsteps import record_harness_overhead
from tests.results_fixture import T0, add_run

REPO = Path(__file__).resolve().parents[2]
WORKER_AHEAD_S = 30.0  # the worker's clock minus the controller's

# --- no raw stamp read ------------------------------------------------------------------------

#: Where a stamp of `tasks` may be read from the table itself: the view that corrects them, the
#: schema that declares them and the ingest that writes them (and hosts' own code, which produces
#: them and runs no SQL over the table).
MAY_READ_RAW = {
    "engine/results/sql/task_times.sql",
    "engine/results/sql/schema.sql",
    "engine/results/sql/ingest_tasks.sql",
}
_READS_TASKS = re.compile(r"\b(?:FROM|JOIN)\s+(?:main\s*\.\s*)?\"?tasks\"?(?![\w.])", re.IGNORECASE)
_COMMENT = re.compile(r"--[^\n]*")


def _stamp_columns() -> list[str]:
    con = duckdb.connect()
    con.execute((REPO / "engine/results/sql/schema.sql").read_text())
    return [
        c
        for (c,) in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = 'tasks' "
            "AND column_name LIKE '%\\_at' ESCAPE '\\'"
        ).fetchall()
    ]


def _sql_texts(path: Path) -> list[str]:
    """The SQL a file holds: a .sql file's statements, a .py file's string literals (an f-string's
    placeholders as {})."""
    if path.suffix == ".sql":
        return _COMMENT.sub("", path.read_text()).split(";")
    out = []
    tree = ast.parse(path.read_text())
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            out.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
    return [_COMMENT.sub("", t) for t in out]


def raw_stamp_reads(root: Path) -> list[str]:
    """`FILE: statement` for each statement that reads `tasks` and names one of its stamps."""
    stamp = re.compile(r"\b(?:" + "|".join(_stamp_columns()) + r")\b")
    found = []
    for room in ("engine", "analysis", "workloads", "benchmarks"):
        for path in sorted((root / room).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.suffix not in (".py", ".sql") or rel in MAY_READ_RAW:
                continue
            for text in _sql_texts(path):
                if _READS_TASKS.search(text) and stamp.search(text):
                    found.append(f"{rel}: {' '.join(text.split())[:160]}")
    return found


def test_no_stamp_is_read_from_tasks_outside_task_times():
    assert raw_stamp_reads(REPO) == [], (
        "read the stamps through the view task_times (the controller's clock), "
        "not the table tasks (each host's own clock)"
    )


def test_the_scan_finds_a_raw_read_in_sql_and_in_python(tmp_path):
    (tmp_path / "analysis" / "sql").mkdir(parents=True)
    (tmp_path / "engine").mkdir()
    (tmp_path / "analysis" / "sql" / "v.sql").write_text(
        "-- FROM tasks, finished_at: a comment is not a read\nCREATE VIEW v AS SELECT 1 FROM task_times;\n"
        "CREATE VIEW w AS SELECT max(t.finished_at) FROM runs r JOIN tasks t USING (run_id);\n"
    )
    (tmp_path / "engine" / "m.py").write_text(
        'Q = "SELECT count(*) FROM tasks WHERE run_id = ?"\n'
        'def f(con, table):\n    return con.execute(f"SELECT min(sent_at) FROM main.tasks WHERE x = {table}")\n'
    )
    assert sorted(r.split(":")[0] for r in raw_stamp_reads(tmp_path)) == ["analysis/sql/v.sql", "engine/m.py"]


# --- the same answers whatever the hosts' clocks ---------------------------------------------------


def _hosts(con, run_id: str, worker_offset: float) -> None:
    """Driver d1 (clock right) and worker w1 (``worker_offset`` s off), as ingest records them."""
    con.execute(
        "INSERT INTO hosts (run_id, host, groups, clock_offset_s, clock_uncertainty_s) VALUES "
        "(?, 'd1', 'drivers', 0.0, 0.001), (?, 'w1', 'workers', ?, 0.001)",
        [run_id, run_id, worker_offset],
    )


def _tasks(con, run_id: str, rows, worker_offset: float) -> None:
    """rows: (task_id, intended, sent, started, finished, state) in controller time; the worker's
    stamps are stored on its own clock."""
    con.executemany(
        "INSERT INTO tasks (run_id, task_id, name, host, publisher_host, intended_at, sent_at, "
        "received_at, started_at, finished_at, state, redelivered) "
        "VALUES (?, ?, 'noop', 'w1', 'd1', ?, ?, ?, ?, ?, ?, false)",
        [
            (
                run_id,
                tid,
                i,
                s,
                None if st is None else st + worker_offset,
                None if st is None else st + worker_offset,
                None if f is None else f + worker_offset,
                state,
            )
            for tid, i, s, st, f, state in rows
        ],
    )


@pytest.fixture
def two_clocks(tmp_path):
    """One database, the same run twice: 'right' (both clocks right) and 'skewed' (the worker's
    30 s ahead), each with its hosts' offsets recorded."""
    path = tmp_path / "r.duckdb"

    def build(rows, samples=(), queue=(), facts=None):
        with views.connect(path) as con:
            for run_id, off in (("right", 0.0), ("skewed", WORKER_AHEAD_S)):
                add_run(
                    con,
                    "e",
                    run_id,
                    {"broker": "redis", "pool": "threads", "case": run_id},
                    metrics=facts,
                    samples=[
                        (h, p, role, ts + (off if h == "w1" else 0.0), rss, pss) for h, p, role, ts, rss, pss in samples
                    ],
                    queue_depth=queue,
                )
                _hosts(con, run_id, off)
                _tasks(con, run_id, rows, off)
        return path

    return build


def _both(path, query: str):
    with views.connect(path) as con:
        return [con.execute(query, [run_id]).fetchall() for run_id in ("right", "skewed")]


def test_harness_overhead_counts_tasks_in_flight_on_one_clock(two_clocks):
    # sent at T0 .. T0+1, finished 1 s later: 2 s in flight of a 10 s run
    path = two_clocks([(f"t{i}", None, T0 + i / 10, T0 + i / 10 + 0.5, T0 + i / 10 + 1, "SUCCESS") for i in range(11)])
    with views.connect(path) as con:
        assert record_harness_overhead(con, "right", 10.0) == pytest.approx(8.0)
        # raw stamps would put the tasks in flight for 32 s: none of the 10 s would be harness
        assert record_harness_overhead(con, "skewed", 10.0) == pytest.approx(8.0)


def test_the_rate_search_judges_latency_on_one_clock(two_clocks):
    # Steps of 1 s at 100, 200, 400, 800/s: 10 ms latency, except the last tenth of step 2 at 0.3 s
    # (p99 ran away): 200/s is the most sustained. Raw, every latency would be 30 s more, and 30.3 s
    # no runaway beside 30.01 s.
    rows = []
    for k in range(4):
        n = 100 * 2**k
        for i in range(n):
            at = T0 + k + i / n
            lat = 0.01 if k < 2 or i < n * 0.9 else 0.3
            rows.append((f"{k}-{i}", at, at, at + lat - 0.005, at + lat, "SUCCESS"))
    path = two_clocks(rows, facts={"ramp_steps_run": 4, "ramp_start_rate": 100, "ramp_factor": 2, "ramp_step_s": 1.0})
    with views.connect(path) as con:
        assert ratesearch.judge(con, "right")[0] == 200
        assert ratesearch.judge(con, "skewed")[0] == 200


def test_rate_over_time_and_memory_views_on_one_clock(two_clocks):
    # 100 tasks sent at T0 .. T0+0.99, each finished 1 s later; the queue drains from 50; the
    # worker's main process grows from 100 to 200 once the tasks arrive (T0 + 1).
    rows = [(f"t{i}", None, T0 + i / 100, T0 + 1 + i / 100, T0 + 1 + i / 100 + 0.005, "SUCCESS") for i in range(100)]
    samples = [("w1", 10, "worker", T0 + k / 2, 100 if k / 2 < 1 else 200, 90 if k / 2 < 1 else 180) for k in range(5)]
    path = two_clocks(
        rows,
        samples=samples,
        queue=[(T0 + 0.5 * k, 50 - 10 * k) for k in range(5)],
        facts={"peak_pss_bytes": 180, "peak_rss_bytes": 200},
    )
    right, skewed = _both(
        path,
        "SELECT second, width_s, completed, rate, queue_depth FROM rate_timeseries WHERE run_id = ? ORDER BY second",
    )
    assert right == skewed and sum(r[2] for r in right) == 100
    right, skewed = _both(path, "SELECT t_s, rss_bytes FROM memory_timeseries WHERE run_id = ? ORDER BY t_s")
    assert right == skewed == [(k / 2, 100 if k / 2 < 1 else 200) for k in range(5)]
    right, skewed = _both(
        path, "SELECT idle_rss_bytes, idle_pss_bytes, all_in_flight FROM memory_per_task WHERE run_id = ?"
    )
    assert right == skewed == [(100, 90, False)]

"""`cmx compare` of a `tasks` experiment in a results database that holds other experiments of
other workloads (issue 51): a param no run of a side sets is one value, unset; the default rows
are the objective and the headline; the table fits 120 columns with its verdict on one line.
Each database is built by hand (no services); the CLI tests run the real command
(2–8 s each, on a loaded 2-core machine)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from cmx.analysis.compare import SelectionError, compare, parse_selection
from cmx.engine.results import db
from tests.conftest import CMX, REPO
from tests.results_fixture import add_run

POOLS = {"threads": 100.0, "prefork": 150.0, "gevent": 90.0}
SPREAD = (-0.01, 0.0, 0.01, 0.02, -0.02)


@pytest.fixture(scope="module")
def among_others(tmp_path_factory):
    """``thumbs`` (workload tasks: pool × 5 ok runs, broker and concurrency fixed) beside
    ``quickstart`` (throughput, params.payload_bytes a dimension) and ``fanout`` (params.work,
    params.speed, params.kwargs, params.profile: params thumbs never sets)."""
    path = tmp_path_factory.mktemp("among") / "r.duckdb"
    with db.connect(path) as con:
        for size in (64, 65536):
            for i in range(3):
                add_run(
                    con,
                    "quickstart",
                    f"q{size}-{i}",
                    {"broker": "redis", "pool": "threads", "params.payload_bytes": size},
                    repeat=i + 1,
                    metrics={"consume_rate": 1000.0 + i, "tasks_lost": 0},
                )
        for i in range(3):
            dims = {"broker": "redis", "pool": "prefork", "params.work": 5, "params.speed": "fast"}
            dims |= {"params.kwargs": "{}", "params.profile": "p.parquet"}
            add_run(con, "fanout", f"f{i}", dims, repeat=i + 1, workload="mixed", metrics={"consume_rate": 9.0})
        for pool, rate in POOLS.items():
            for i, jitter in enumerate(SPREAD):
                add_run(
                    con,
                    "thumbs",
                    f"t-{pool}-{i}",
                    {"broker": "redis", "pool": pool, "concurrency": 4},
                    repeat=i + 1,
                    workload="tasks",
                    params={"tasks": 200},
                    metrics={
                        "consume_rate": rate * (1 + jitter),
                        "latency_p99_s": 0.2 / (1 + jitter),
                        "broker_memory_peak_bytes": 3e6,
                        "tasks_failed": 0,
                        "tasks_lost": 0,
                        "publish_rate": 5000.0,
                    },
                )
    return path


def run(*args: str, columns: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": str(columns)}
    return subprocess.run([*CMX, *args], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)


def test_a_param_no_run_of_a_side_sets_is_one_value(among_others):
    with db.connect(among_others, read_only=True) as con:
        res = compare(con, parse_selection("thumbs:pool=threads"), parse_selection("thumbs:pool=prefork"))
    assert res.baseline.cells == res.contender.cells == 1 and not res.baseline.differing
    assert len(res.baseline.run_ids) == 5


def test_the_error_names_a_selection_that_works(among_others):
    with db.connect(among_others, read_only=True) as con:
        with pytest.raises(SelectionError) as raised:
            compare(con, parse_selection("thumbs"), parse_selection("thumbs:pool=prefork"))
        message = str(raised.value)
        assert "pool in {gevent, prefork, threads}" in message and "(unset)" not in message
        suggested = message.split("e.g. ")[1].split(", or pass")[0]
        assert suggested == "thumbs:pool=gevent"
        compare(con, parse_selection(suggested), parse_selection("thumbs:pool=prefork"))  # it works


def test_default_rows_are_the_objective_and_the_headline(among_others):
    with db.connect(among_others, read_only=True) as con:
        a, b = parse_selection("thumbs:pool=threads"), parse_selection("thumbs:pool=prefork")
        shown = [m.metric for m in compare(con, a, b).metrics]
        every = [m.metric for m in compare(con, a, b, every=True).metrics]
    assert shown[0] == "consume_rate" and "latency_p99_s" in shown and "tasks_failed" in shown
    assert "publish_rate" not in shown and "broker_memory_peak_bytes" not in shown
    assert {"publish_rate", "broker_memory_peak_bytes"} <= set(every) and set(shown) < set(every)


def _table_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line[:1] in "│┃"]


def test_the_users_case_at_120_columns(among_others):
    """The exact case of issue 51: one revision, other experiments' params unset on both sides."""
    p = run("compare", "thumbs:pool=threads", "thumbs:pool=prefork", "--db", str(among_others))
    assert p.returncode == 0, p.stderr
    assert "Warning" not in p.stderr and "Traceback" not in p.stderr
    lines = p.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120
    header = next(line for line in lines if line.startswith("┃"))
    assert "verdict" in header
    rows = _table_lines(p.stdout)
    # every row's verdict on the metric's own line, the interval under the median, whole
    assert any("consume_rate" in r and "▲ better" in r for r in rows)
    assert any("[98–102/s]" in r and "[147–153/s]" in r for r in rows)
    for r in rows:
        assert r.rstrip().endswith(("│", "┃")), r  # the right border is never cut
    assert not any(r.split("│")[1].strip().startswith("s ") for r in rows if r.startswith("│"))


def test_every_metric_keeps_the_verdict_and_whole_names(among_others):
    p = run("compare", "thumbs:pool=threads", "thumbs:pool=prefork", "--all", "--db", str(among_others))
    assert p.returncode == 0, p.stderr
    assert max(len(line) for line in p.stdout.splitlines()) <= 120
    names = [r.split("│")[1].strip() for r in _table_lines(p.stdout) if r.startswith("│")]
    assert "broker_memory_peak_bytes" in names  # never broker_memory_peak_byte / s
    assert "publish_rate" in names
    assert "verdict" in next(line for line in p.stdout.splitlines() if line.startswith("┃"))
    assert "left out" not in p.stdout or "(verdict" not in p.stdout.split("left out")[1]


def test_one_metric_at_a_narrow_width_keeps_a_one_line_verdict(among_others):
    p = run(
        "compare", "thumbs:pool=threads", "thumbs:pool=gevent", "-m", "consume_rate", "--db", str(among_others),
        columns=80,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert max(len(line) for line in p.stdout.splitlines()) <= 80
    rows = [r for r in _table_lines(p.stdout) if r.startswith("│")]
    assert len(rows) == 2 and "consume_rate" in rows[0] and "▼ worse" in rows[0]  # median line, interval line
    assert "[98–102/s]" in rows[1] and "[88–92/s]" in rows[1]
    assert all(r.rstrip().endswith("│") for r in rows)
    assert "left out to fit 80 columns" in p.stdout


def test_json_is_unchanged_by_the_default_rows(among_others):
    p = run("compare", "thumbs:pool=threads", "thumbs:pool=prefork", "--format", "json", "--db", str(among_others))
    got = json.loads(p.stdout)
    assert got[0]["metric"] == "consume_rate" and got[0]["verdict"] == "better"

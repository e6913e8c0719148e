"""A 2 cells × 3 repeats sweep with its output captured (no terminal): a progress line per run
with an ETA, the shuffled order stored, intervals and n in the summary, and `cmx compare` on it."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import cmx, query, write

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("progress")
    exp = write(
        tmp / "prog.yaml",
        """
        name: prog
        repeats: 3
        workload:
          name: throughput
          params: {tasks: 50, mode: backlog}
        fixed: {broker: redis, backend: none, concurrency: 1}
        matrix:
          pool: [solo, threads]
        limits: {run_timeout: 2m}
    """,
    )
    db = tmp / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db), "--shuffle", "5")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return db, proc


def test_a_line_per_run_with_an_eta(sweep):
    _, proc = sweep
    lines = [l for l in proc.stdout.splitlines() if re.match(r"\[\d/6\] ", l)]
    assert [l.split("]")[0] + "]" for l in lines] == [f"[{k}/6]" for k in range(1, 7)], proc.stdout
    assert re.fullmatch(r"\[1/6\] pool=(solo|threads) #1 ok in \d+\.\d s · ETA (\d+ (h|min|s) ?)+", lines[0]), lines[0]
    # the time left, in the one form a terminal shows too (issue 43), never a clock time
    assert all(" ETA " in l for l in lines[:5]) and lines[5].endswith("· done")
    assert "\x1b[" not in proc.stdout  # no terminal: no escape codes, no redrawn bar


def test_the_start_says_what_the_sweep_can_show(sweep):
    _, proc = sweep
    before = proc.stdout.split("[1/6]", 1)[0]  # said before the first run is spent (issue 38)
    assert (
        "shows: no difference between cells can be shown at 3 runs a cell (the smallest Mann-Whitney p is 0.1); "
        "repeats: 4 would allow it"
    ) in before, before


def test_order_is_shuffled_within_rounds_and_stored(sweep):
    db, _ = sweep
    rows = query(db, "SELECT s.seq, s.repeat, r.pool FROM run_starts s JOIN runs r USING (run_id) ORDER BY s.seq")
    assert [seq for seq, _, _ in rows] == list(range(1, 7))
    assert [rep for _, rep, _ in rows] == [1, 1, 2, 2, 3, 3]  # rounds stay whole
    assert all({p for _, rep, p in rows if rep == k} == {"solo", "threads"} for k in (1, 2, 3))
    assert query(db, "SELECT DISTINCT shuffle_seed FROM sweeps") == [(5,)]


def test_summary_shows_intervals_and_n(sweep):
    _, proc = sweep
    table = proc.stdout.split("prog (results in", 1)[1]
    assert table.count("3/3") == 2 and "95 % bootstrap interval" in table and "(n = runs ok)" in table
    # under each median of both cells, its interval
    assert len(re.findall(r"\[[\d.,]+(–| – )[\d.,]+ ?\D*\]", table)) >= 8, table


def test_compare_on_the_sweep(sweep):
    db, _ = sweep
    p = cmx("compare", "prog:pool=solo", "prog:pool=threads", "--db", str(db), "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = {r["metric"]: r for r in json.loads(p.stdout)}
    rate = rows["consume_rate"]
    assert rate["baseline"]["n"] == rate["contender"]["n"] == 3
    assert rate["baseline"]["low"] <= rate["baseline"]["median"] <= rate["baseline"]["high"]
    # With 3 against 3 the smallest p is 0.1: never better or worse, and "same" only when shown within ±5 %.
    assert rate["p_value"] >= 0.1 and rate["verdict"] in ("same", "inconclusive")
    assert rate["margin_pct"] == 5.0 and "unstable" in rate["baseline"]
    if rate["verdict"] == "inconclusive":
        assert rate["runs_needed"] >= 4
    p = cmx("compare", "prog", "prog:pool=threads", "--db", str(db))
    assert p.returncode == 2 and "baseline selects 2 cells: pool in {solo, threads}" in p.stderr

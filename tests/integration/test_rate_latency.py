"""A rate-vs-latency sweep on localhost: one ramp search run finds the cell's maximum sustainable
rate, the fraction runs publish at fractions of it, and the report draws latency against rate."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cmx, query, write

pytestmark = pytest.mark.integration

FRACTIONS = (0.25, 0.5, 0.9)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ratelat")
    exp = write(
        tmp / "rl.yaml",
        """
        name: rl
        workload:
          name: throughput
          params: {tasks: 200, mode: stream, rate: 50, ramp_steps: 6, ramp_step_s: 1.5, ramp_factor: 2}
        fixed: {broker: redis, backend: none, pool: threads, concurrency: 4, prefetch_multiplier: 1}
        matrix:
          params.rate_fraction: [0.25, 0.5, 0.9]
        limits: {run_timeout: 2m}
    """,
    )
    db = tmp / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp, db, proc


def test_the_search_finds_a_maximum_once(sweep):
    _, db, proc = sweep
    rows = query(
        db,
        """SELECT r.run_id, r.status, m.value FROM runs r JOIN metrics m USING (run_id)
                        WHERE r."params.mode" = 'ramp' AND m.name = 'max_sustainable_rate'""",
    )
    assert len(rows) == 1, rows  # one search for the cell, shared by its three fractions
    _, status, best = rows[0]
    assert status == "ok" and best in [50 * 2**k for k in range(6)]
    steps = dict(query(db, "SELECT name, value FROM metrics WHERE run_id = ? AND name LIKE 'ramp_%'", [rows[0][0]]))
    assert 1 <= steps["ramp_steps_run"] <= 6
    assert "finding the maximum sustainable rate" in proc.stdout and "search run" in proc.stdout
    assert "[1/3]" in proc.stdout and "[3/3]" in proc.stdout


def test_fraction_runs_publish_at_their_fraction(sweep):
    _, db, _ = sweep
    best = query(db, "SELECT value FROM metrics WHERE name = 'max_sustainable_rate'")[0][0]
    rows = query(
        db,
        """
        SELECT r."params.rate_fraction", r.status,
               max(m.value) FILTER (WHERE m.name = 'target_rate'),
               max(m.value) FILTER (WHERE m.name = 'publish_rate'),
               max(m.value) FILTER (WHERE m.name = 'tasks_lost')
        FROM runs r JOIN metrics m USING (run_id) WHERE r."params.rate_fraction" IS NOT NULL
        GROUP BY ALL ORDER BY 1""",
    )
    assert [r[0] for r in rows] == list(FRACTIONS)
    for fraction, status, target, published, lost in rows:
        assert status == "ok" and lost == 0
        assert target == pytest.approx(fraction * best)
        # What ran is read back: the publish rate follows the target (generous: a loaded 2-core machine).
        assert 0.3 * target <= published <= 1.3 * target, (fraction, target, published)


def test_the_report_draws_latency_against_rate(sweep):
    tmp, db, _ = sweep
    out = tmp / "report"
    p = cmx("report", "rl", "--db", str(db), "--out", str(out))
    assert p.returncode == 0, p.stderr
    spec = json.loads((out / "rate_latency.vl.json").read_text())

    def rows(node):
        found = []
        if isinstance(node, dict):
            found += (
                [v for v in node.get("values", []) if isinstance(v, dict)]
                if isinstance(node.get("values"), list)
                else []
            )
            for v in node.values():
                found += rows(v)
        elif isinstance(node, list):
            for v in node:
                found += rows(v)
        return found

    points = rows(spec)
    assert sorted({p["series"].split()[-1] for p in points}) == ["p50", "p99"]
    p99 = sorted((p["fraction"], p["rate"]) for p in points if p["series"].endswith("p99"))
    assert [f for f, _ in p99] == list(FRACTIONS)
    assert p99[0][1] < p99[-1][1]  # the achieved rate grows with the fraction

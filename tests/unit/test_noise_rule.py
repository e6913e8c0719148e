"""Noise from the hosts' noise.json to the metrics (engine/results/ingest_noise.py), and the rule
that says two sets of runs' noise differs (analysis/noise.py)."""

from __future__ import annotations

import json

import duckdb
import pytest

from cmx.analysis import noise
from cmx.engine.results import db, metricdefs
from cmx.engine.results.ingest_noise import ingest_noise, of_host
from cmx.workloads.vocab import metrics as M

QUIET = {
    "host": "h1",
    "clk_tck": 100,
    "cpus": 2,
    "total_ticks": 2000,
    "busy_ticks": 300,
    "steal_ticks": 20,
    "own_ticks": 260,
    "load1_mean": 1.0,
    "load_readings": 10,
    "psi": {"cpu": {"some_us": 500_000, "full_us": 0, "seconds": 10.0}, "memory": {"some_us": 0, "seconds": 10.0}},
}


def test_one_hosts_noise_from_its_counts():
    got = of_host(QUIET)
    assert got[M.NOISE_CPU_SHARE] == pytest.approx(40 / 2000)  # busy less the run's own, of all CPU time
    assert got[M.NOISE_STEAL_SHARE] == pytest.approx(0.01)
    assert got[M.NOISE_LOAD1] == pytest.approx(0.5)  # per core
    assert got[M.NOISE_PSI_CPU_SOME_SHARE] == pytest.approx(0.05)
    assert got[M.NOISE_PSI_MEMORY_SOME_SHARE] == 0


def test_no_pressure_files_no_stat_no_value_and_the_share_stays_in_0_1():
    got = of_host({**QUIET, "psi": {}, "own_ticks": 310})  # the run's own read a hair over busy
    assert got[M.NOISE_CPU_SHARE] == 0
    assert M.NOISE_PSI_CPU_SOME_SHARE not in got and M.NOISE_PSI_MEMORY_SOME_SHARE not in got
    assert of_host({"host": "h1", "errors": ["/proc/stat: OSError"], "psi": {}}) == {}


def test_the_runs_noise_is_its_worst_host_and_each_host_is_kept(tmp_path):
    for host, busy in (("h1", 300), ("h2", 1260)):
        (tmp_path / host).mkdir()
        (tmp_path / host / "noise.json").write_text(json.dumps({**QUIET, "host": host, "busy_ticks": busy}))
    (tmp_path / "h3").mkdir()  # an older cmx's artifacts: no noise.json
    with db.connect(tmp_path / "r.duckdb") as con:
        metrics = dict((n, v) for n, v, _ in ingest_noise(con, "r1", [tmp_path / h for h in ("h1", "h2", "h3")]))
        per_host = con.execute(
            "SELECT host, value FROM host_noise WHERE name = ? ORDER BY host", [M.NOISE_CPU_SHARE]
        ).fetchall()
    assert metrics[M.NOISE_CPU_SHARE] == pytest.approx(0.5)
    assert per_host == [("h1", pytest.approx(0.02)), ("h2", pytest.approx(0.5))]


def test_noise_metrics_are_declared_in_the_noise_group_and_never_judged():
    for name in M.NOISE_METRICS:
        assert metricdefs.group_of(name) == metricdefs.NOISE
        assert metricdefs.get(name).better is metricdefs.Better.NEITHER
        assert metricdefs.get(name).unit == "share"


def _con(sides: dict[str, list[dict[str, float]]]):
    con = duckdb.connect(":memory:")
    con.execute("CREATE TABLE metrics (run_id VARCHAR, name VARCHAR, value DOUBLE, unit VARCHAR)")
    for side, runs in sides.items():
        for i, values in enumerate(runs):
            for n, v in values.items():
                con.execute("INSERT INTO metrics VALUES (?, ?, ?, 'share')", [f"{side}{i}", n, v])
        con.execute("INSERT INTO metrics VALUES (?, 'consume_rate', 100, 'tasks/s')", [f"{side}0"])
    return con


def _ids(prefix: str, n: int = 3) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def test_a_host_three_times_busier_after_is_said():
    con = _con(
        {
            "a": [{M.NOISE_CPU_SHARE: v} for v in (0.10, 0.09, 0.11)],
            "b": [{M.NOISE_CPU_SHARE: v} for v in (0.31, 0.30, 0.40)],
        }
    )
    assert (
        noise.differs(con, _ids("a"), _ids("b"))
        == "host 3.1× busier after (outside the run: 31 % of its cores after, 10 % before)"
    )
    assert noise.differs(con, _ids("b"), _ids("a"), sides=("in the baseline", "in the contender")) == (
        "host 3.1× busier in the baseline (outside the run: 31 % of its cores in the baseline, 10 % in the contender)"
    )


def test_a_small_or_relative_only_difference_is_alike():
    # 2× but only 0.02 of the cores apart; then 0.08 apart but 1.4×: neither is material.
    con = _con(
        {
            "a": [{M.NOISE_CPU_SHARE: 0.02}],
            "b": [{M.NOISE_CPU_SHARE: 0.04}],
            "c": [{M.NOISE_CPU_SHARE: 0.20}],
            "d": [{M.NOISE_CPU_SHARE: 0.28}],
        }
    )
    assert noise.differs(con, ["a0"], ["b0"]) is None
    assert noise.differs(con, ["c0"], ["d0"]) is None


def test_a_quarter_core_more_on_a_half_busy_host_is_said_though_under_twice():
    con = _con({"a": [{M.NOISE_CPU_SHARE: 0.30}], "b": [{M.NOISE_CPU_SHARE: 0.55}]})
    assert (
        noise.differs(con, ["a0"], ["b0"])
        == "host 1.8× busier after (outside the run: 55 % of its cores after, 30 % before)"
    )


def test_from_a_quiet_host_to_a_busy_one_and_steal_and_memory_pressure():
    con = _con(
        {
            "a": [{M.NOISE_CPU_SHARE: 0.0, M.NOISE_STEAL_SHARE: 0.0, M.NOISE_PSI_MEMORY_SOME_SHARE: 0.0}],
            "b": [{M.NOISE_CPU_SHARE: 0.3, M.NOISE_STEAL_SHARE: 0.12, M.NOISE_PSI_MEMORY_SOME_SHARE: 0.08}],
        }
    )
    assert noise.differs(con, ["a0"], ["b0"]) == (
        "host busier after (outside the run: 30 % of its cores after, 0 % before); steal 12 % after, 0 % before; "
        "memory pressure after (8 % of the time stalled, 0 % before)"
    )


def test_no_noise_metrics_on_a_side_says_nothing():
    con = _con({"a": [{M.NOISE_CPU_SHARE: 0.0}], "b": [{}]})
    assert noise.differs(con, ["a0"], ["b0"]) is None
    assert noise.differs(con, [], []) is None


def test_a_points_noise_in_words():
    assert (
        noise.describe(
            {M.NOISE_CPU_SHARE: [0.1, 0.12, 0.3], M.NOISE_STEAL_SHARE: [0.001], M.NOISE_PSI_MEMORY_SOME_SHARE: [0.06]}
        )
        == "outside CPU 12 % of cores, memory pressure 6 %"
    )
    assert noise.describe({}) is None


def test_compare_says_the_noise_differs_beside_its_verdicts(tmp_path):
    from tests.conftest import cmx
    from tests.results_fixture import add_run

    path = tmp_path / "n.duckdb"
    with db.connect(path) as con:
        for pool, outside in (("threads", (0.01, 0.02, 0.015)), ("solo", (0.30, 0.35, 0.32)), ("gevent", (0.02,) * 3)):
            for i, share in enumerate(outside):
                add_run(
                    con,
                    "n",
                    f"{pool}-{i}",
                    {"broker": "redis", "pool": pool, "concurrency": 4},
                    repeat=i + 1,
                    metrics={M.CONSUME_RATE: 100.0 + i, M.NOISE_CPU_SHARE: share},
                )
    p = cmx("compare", "n:pool=threads", "n:pool=solo", "--db", str(path), "--format", "json", "--all")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    label = (
        "host 21.3× busier in the contender (outside the run: 32 % of its cores in the contender, 2 % in the baseline)"
    )
    assert {r["noise"] for r in rows} == {label}
    assert {"metric", "baseline", "contender", "change_pct", "p_value", "margin_pct", "verdict"} <= set(rows[0])
    assert f"warning: noise differs: {label}" in p.stderr
    noisy = next(r for r in rows if r["metric"] == M.NOISE_CPU_SHARE)
    assert noisy["verdict"] not in ("better", "worse")  # shown, never judged: no gate on it
    p = cmx("compare", "n:pool=threads", "n:pool=solo", "--db", str(path), "--format", "markdown", "--fail-on", "worse")
    assert p.returncode == 0 and f"_noise differs: {label}_" in p.stdout
    p = cmx("compare", "n:pool=threads", "n:pool=gevent", "--db", str(path), "--format", "json")
    assert {r["noise"] for r in json.loads(p.stdout)} == {None} and "noise differs" not in p.stderr

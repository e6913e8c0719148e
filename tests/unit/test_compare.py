"""`cmx compare`: like-for-like selections, n, intervals, p-values and verdicts over stored runs
of known values (no services)."""
from __future__ import annotations

import csv
import io
import json
import random
import statistics

import pytest

from cmx.analysis import stats
from cmx.analysis.compare import Selection, SelectionError, compare, parse_selection
from cmx.engine.results import db
from tests.conftest import cmx
from tests.results_fixture import add_run, build_matrix

# Cell "threads": consume_rate around 100 (median 100); cell "solo": exactly twice each value.
THREADS = [100.0, 102.0, 98.0, 101.0, 99.0]
LAT = [0.10, 0.11, 0.09, 0.12, 0.08]


@pytest.fixture(scope="module")
def matrix_db(tmp_path_factory):
    return build_matrix(tmp_path_factory.mktemp("cmp") / "r.duckdb")


@pytest.fixture(scope="module")
def known_db(tmp_path_factory):
    """Experiment k: pool threads × 5 runs, pool solo × 5 runs at 2× the rate and ½ the latency,
    pool gevent × 2 runs; redis, concurrency 4 everywhere. Hosts differ in kernel for solo."""
    path = tmp_path_factory.mktemp("known") / "k.duckdb"
    with db.connect(path) as con:
        for pool, rates, lats in (("threads", THREADS, LAT), ("solo", [2 * v for v in THREADS], [v / 2 for v in LAT]),
                                  ("gevent", THREADS[:2], LAT[:2])):
            for i, (rate, lat) in enumerate(zip(rates, lats)):
                run_id = f"{pool}-{i}"
                add_run(con, "k", run_id, {"broker": "redis", "pool": pool, "concurrency": 4}, repeat=i + 1,
                        metrics={"consume_rate": rate, "latency_p99_s": lat, "tasks_lost": 0,
                                 "broker_connections_max": 3})
                con.execute("INSERT INTO hosts (run_id, host, cpu_model, cores, kernel, celery, kombu) "
                            "VALUES (?, 'localhost', 'Xeon', 2, ?, '5.4.0', '5.4.0')",
                            [run_id, "6.1" if pool == "solo" else "6.8"])
        add_run(con, "k", "threads-failed", {"broker": "redis", "pool": "threads", "concurrency": 4}, repeat=6,
                status="failed", metrics={"consume_rate": 1.0})
    return path


def by_metric(path, a, b, pool_cells=False):
    with db.connect(path, read_only=True) as con:
        res = compare(con, parse_selection(a), parse_selection(b), pool_cells=pool_cells)
    return {m.metric: m for m in res.metrics}, res


# -- the statistics alone ------------------------------------------------------------------------

def test_mann_whitney_exact_values():
    # No overlap between two samples of 5: the two most extreme of C(10, 5) = 252 splits.
    assert stats.mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert stats.mann_whitney_p([1, 2, 3], [1, 2, 3]) == 1.0
    # With a tie: mid-ranks 1 2 3.5 3.5 5 6 7 8, rank sum of the first 11.5 against a mean of 18; the
    # splits of 4 as far out (sum ≤ 11.5: {1,2,3.5,3.5}, {1,2,3.5,5} twice) and their mirrors: 6 of 70.
    assert stats.mann_whitney_p([1, 2, 3, 4], [3, 5, 6, 7]) == pytest.approx(6 / 70)
    # Large samples take the normal approximation and still separate clearly different ones.
    assert stats.mann_whitney_p(list(range(30)), list(range(100, 130))) < 1e-6


def test_interval_contains_true_median():
    """Samples of 9 from a distribution whose median is 100: the 95 % interval holds 100 in
    (about) 95 % of samples and always contains the sample median."""
    covered = 0
    for seed in range(40):
        rng = random.Random(seed)
        sample = [rng.gauss(100, 10) for _ in range(9)]
        s = stats.summarize(sample)
        assert s.low <= statistics.median(sample) <= s.high
        covered += s.low <= 100 <= s.high
    assert covered >= 34, covered  # 40 × 0.95 = 38; generous for a percentile bootstrap at n = 9


def test_summary_is_seeded_and_small_n():
    assert stats.summarize([3.0, 1.0, 2.0, 5.0]) == stats.summarize([3.0, 1.0, 2.0, 5.0])
    assert stats.summarize([7.0]) == stats.Summary(1, 7.0, 7.0, 7.0)
    assert stats.summarize([]) == stats.Summary(0, None, None, None)


def test_verdict_rule():
    assert stats.verdict(5, 5, 1, 2, 0.01, "higher") == "better"
    assert stats.verdict(5, 5, 1, 2, 0.01, "lower") == "worse"
    assert stats.verdict(5, 5, -1, 2, 0.01, "higher") == "same"      # interval crosses zero
    assert stats.verdict(5, 5, 1, 2, 0.2, "higher") == "same"        # p above 0.05
    assert stats.verdict(2, 5, 1, 2, 0.01, "higher") == "n too small"
    assert stats.verdict(5, 5, 1, 2, 0.01, "neither") == "differs"


# -- selections and the database -----------------------------------------------------------------

def test_parse_selection():
    assert parse_selection("quickstart") == Selection("quickstart")
    assert parse_selection("q:broker=redis, concurrency=4") == Selection("q", (("broker", "redis"), ("concurrency", "4")))
    for bad in ("", ":broker=redis", "q:broker", "q:=redis"):
        with pytest.raises(ValueError):
            parse_selection(bad)


def test_twice_the_rate_with_n5_is_better_and_significant(known_db):
    got, res = by_metric(known_db, "k:pool=threads", "k:pool=solo")
    rate = got["consume_rate"].result
    assert (rate.baseline.n, rate.baseline.median, rate.contender.n, rate.contender.median) == (5, 100, 5, 200)
    assert rate.baseline.low <= 100 <= rate.baseline.high and rate.baseline.high <= 102
    assert rate.change_pct == pytest.approx(100.0)
    assert rate.p_value < 0.05
    assert rate.verdict == "better"
    lat = got["latency_p99_s"].result
    assert lat.change_pct == pytest.approx(-50.0) and lat.p_value < 0.05 and lat.verdict == "better"
    # Reverse the sides: the same evidence, the other verdict.
    rev, _ = by_metric(known_db, "k:pool=solo", "k:pool=threads")
    assert rev["consume_rate"].result.verdict == "worse" and rev["latency_p99_s"].result.verdict == "worse"
    # The failed run's 1.0 is not among the baseline's values; identical zeros are the same.
    assert got["tasks_lost"].result.verdict == "same"
    assert (got["broker_connections_max"].better, got["broker_connections_max"].result.verdict) == ("lower", "same")
    # Hosts: the solo runs ran on another kernel.
    assert res.warnings == ["hosts differ: kernel is 6.8 in the baseline but 6.1 in the contender"]


def test_identical_selections_are_the_same(known_db):
    got, res = by_metric(known_db, "k:pool=threads", "k:pool=threads")
    for m in got.values():
        assert m.result.verdict == "same", m
        assert m.result.p_value == 1.0
    assert res.warnings == [] and res.notes == []


def test_n_below_three_gives_no_verdict(known_db):
    got, _ = by_metric(known_db, "k:pool=threads", "k:pool=gevent")
    assert got["consume_rate"].result.contender.n == 2
    assert got["consume_rate"].result.verdict == "n too small"


def test_selection_spanning_cells_names_the_dimension(known_db, matrix_db):
    with db.connect(known_db, read_only=True) as con:
        with pytest.raises(SelectionError, match=r"baseline selects 3 cells: pool in \{gevent, solo, threads\}; "
                                                 r"add pool=\.\.\. or pass --pool-cells"):
            compare(con, parse_selection("k"), parse_selection("k:pool=solo"))
    with db.connect(matrix_db, read_only=True) as con:
        with pytest.raises(SelectionError, match=r"contender selects 4 cells: pool in \{prefork, threads\}, "
                                                 r"concurrency in \{1, 4\}"):
            compare(con, parse_selection("exp:broker=redis,pool=threads,concurrency=1"),
                    parse_selection("exp:broker=rabbitmq"))


def test_pool_cells_pools_and_says_so(matrix_db):
    got, res = by_metric(matrix_db, "exp:broker=redis", "exp:broker=rabbitmq", pool_cells=True)
    rate = got["consume_rate"].result
    # redis ok runs: 1011 1012 1041 1042 1111 1112 1141 1142 (the failed run's 1.0 is left out).
    assert (rate.baseline.median, rate.contender.median, rate.baseline.n, rate.contender.n) == (1076.5, 2076.5, 8, 8)
    assert rate.verdict == "better" and rate.p_value < 0.001
    assert res.notes[0] == "exp:broker=redis pools 4 cells: pool in {prefork, threads}, concurrency in {1, 4}"


def test_errors(matrix_db):
    with db.connect(matrix_db, read_only=True) as con:
        with pytest.raises(ValueError, match="not a dimension"):
            compare(con, parse_selection("exp:colour=red"), parse_selection("exp"))
        with pytest.raises(ValueError, match="no ok runs"):
            compare(con, parse_selection("exp:broker=kafka"), parse_selection("exp"))


def test_filters_match_numbers_as_numbers_and_booleans_in_any_case(tmp_path):
    path = tmp_path / "h.duckdb"
    with db.connect(path) as con:
        for i, (heartbeat, gossip) in enumerate(((0.0, True), (10.0, False))):
            add_run(con, "h", f"r{i}", {"broker": "rabbitmq", "heartbeat": heartbeat, "worker.gossip": gossip},
                    metrics={"consume_rate": 100.0 * (i + 1)})
    # heartbeat is stored as DOUBLE (0.0): the 0 a user types must still match it
    got, _ = by_metric(path, "h:heartbeat=0", "h:heartbeat=10")
    assert got["consume_rate"].result.change_pct == 100
    got, _ = by_metric(path, "h:worker.gossip=True", "h:worker.gossip=false")
    assert got["consume_rate"].result.verdict == "n too small"
    with db.connect(path, read_only=True) as con:
        with pytest.raises(ValueError, match="heartbeat is a number, got 'off'"):
            compare(con, parse_selection("h:heartbeat=off"), parse_selection("h"))


def test_cli_json_contract_and_formats(known_db):
    p = cmx("compare", "k:pool=threads", "k:pool=solo", "--db", str(known_db), "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert all(set(r) == {"metric", "baseline", "contender", "change_pct", "p_value", "verdict"} for r in rows)
    rate = next(r for r in rows if r["metric"] == "consume_rate")
    assert set(rate["baseline"]) == {"n", "median", "low", "high"}
    assert (rate["baseline"]["n"], rate["baseline"]["median"], rate["contender"]["median"]) == (5, 100, 200)
    assert rate["verdict"] == "better" and rate["p_value"] < 0.05
    assert "warning: hosts differ: kernel" in p.stderr
    p = cmx("compare", "k:pool=threads", "k:pool=solo", "--db", str(known_db), "--format", "csv")
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(p.stdout))}
    assert rows["consume_rate"]["verdict"] == "better" and rows["consume_rate"]["contender_n"] == "5"
    p = cmx("compare", "k:pool=threads", "k:pool=solo", "--db", str(known_db), "--format", "markdown")
    assert "| consume_rate | higher | 100/s [" in p.stdout and "(n=5) | +100.0% | 0.008 | ▲ better |" in p.stdout
    p = cmx("compare", "k:pool=threads", "k:pool=solo", "--db", str(known_db))
    assert p.returncode == 0 and "▲ better" in p.stdout and "bootstrap" in p.stdout


def test_cli_exit_2_on_a_mixture(known_db, matrix_db):
    p = cmx("compare", "k", "k:pool=solo", "--db", str(known_db))
    assert p.returncode == 2 and "baseline selects 3 cells: pool in {gevent, solo, threads}" in p.stderr
    assert "Traceback" not in p.stderr
    p = cmx("compare", "exp:colour=red", "exp", "--db", str(matrix_db))
    assert p.returncode == 2 and "not a dimension" in p.stderr
    p = cmx("compare", "exp:broker=redis", "exp:broker=rabbitmq", "--db", str(matrix_db), "--pool-cells",
            "--format", "json")
    assert p.returncode == 0 and "note: exp:broker=redis pools 4 cells" in p.stderr


def test_a_selection_spanning_revisions_is_refused_when_runs_have_a_revision(tmp_path):
    """Where `runs` carries a revision column (the experiment's definition changed between sweeps),
    one cell of two revisions is no like-for-like side either; revision=N picks one."""
    path = tmp_path / "rev.duckdb"
    with db.connect(path) as con:
        for i in range(6):
            add_run(con, "v", f"a{i}", {"pool": "threads"}, repeat=i + 1, metrics={"consume_rate": 100.0 + i})
            add_run(con, "v", f"b{i}", {"pool": "solo"}, repeat=i + 1, metrics={"consume_rate": 200.0 + i})
        view = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'runs'").fetchone()[0]
        con.execute(view.replace("CREATE VIEW runs AS SELECT", "CREATE OR REPLACE VIEW runs AS SELECT "
                                 "CASE WHEN s.repeat > 3 THEN 2 ELSE 1 END AS revision,", 1))
    with db.connect(path, read_only=True) as con:
        assert "revision" in [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
        with pytest.raises(SelectionError, match=r"baseline selects runs of more than one revision: "
                                                 r"revision in \{1, 2\}; add revision=\.\.\. or pass --pool-cells"):
            compare(con, parse_selection("v:pool=threads"), parse_selection("v:pool=solo,revision=2"))
        res = compare(con, parse_selection("v:pool=threads,revision=2"), parse_selection("v:pool=solo,revision=2"))
        rate = next(m for m in res.metrics if m.metric == "consume_rate").result
        assert (rate.baseline.n, rate.baseline.median, rate.contender.median) == (3, 104, 204)

"""`cmx compare`: like-for-like selections, n, intervals, p-values and verdicts over stored runs
of known values (no services)."""

from __future__ import annotations

import csv
import io
import json
import random
import statistics

import pytest

from hypothesis import given, settings, strategies as st

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
        for pool, rates, lats in (
            ("threads", THREADS, LAT),
            ("solo", [2 * v for v in THREADS], [v / 2 for v in LAT]),
            ("gevent", THREADS[:2], LAT[:2]),
        ):
            for i, (rate, lat) in enumerate(zip(rates, lats)):
                run_id = f"{pool}-{i}"
                add_run(
                    con,
                    "k",
                    run_id,
                    {"broker": "redis", "pool": pool, "concurrency": 4},
                    repeat=i + 1,
                    metrics={"consume_rate": rate, "latency_p99_s": lat, "tasks_lost": 0, "broker_connections_max": 3},
                )
                con.execute(
                    "INSERT INTO hosts (run_id, host, cpu_model, cores, kernel, celery, kombu) "
                    "VALUES (?, 'localhost', 'Xeon', 2, ?, '5.4.0', '5.4.0')",
                    [run_id, "6.1" if pool == "solo" else "6.8"],
                )
        add_run(
            con,
            "k",
            "threads-failed",
            {"broker": "redis", "pool": "threads", "concurrency": 4},
            repeat=6,
            status="failed",
            metrics={"consume_rate": 1.0},
        )
    return path


def by_metric(path, a, b, pool_cells=False, every=True):
    with db.connect(path, read_only=True) as con:
        res = compare(con, parse_selection(a), parse_selection(b), pool_cells=pool_cells, every=every)
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
    # (n_a, n_b, change interval %, diff interval, p, better, margin)
    assert stats.verdict(5, 5, 10, 20, 1, 2, 0.01, "higher") == "better"
    assert stats.verdict(5, 5, 10, 20, 1, 2, 0.01, "lower") == "worse"
    assert stats.verdict(5, 5, -10, 20, -1, 2, 0.01, "higher") == "inconclusive"  # interval crosses zero
    assert stats.verdict(5, 5, 10, 20, 1, 2, 0.2, "higher") == "inconclusive"  # p above 0.05
    assert stats.verdict(5, 5, -4, 4.9, -1, 2, 0.2, "higher") == "same"  # shown within ±5 %
    assert stats.verdict(5, 5, -4, 5.1, -1, 2, 0.2, "higher") == "inconclusive"  # not all of it
    assert stats.verdict(5, 5, -4, 5.1, -1, 2, 0.2, "higher", margin_pct=6) == "same"
    assert stats.verdict(10, 10, 0.8, 1.2, 1, 2, 0.001, "higher") == "small"  # shown, but within the margin
    assert stats.verdict(2, 5, 10, 20, 1, 2, 0.01, "higher") == "n too small"
    assert stats.verdict(5, 5, 10, 20, 1, 2, 0.01, "neither") == "differs"


# -- the rule at n = 3, 5 and 10: clear, absent and borderline differences -------------------------


def test_n3_a_clear_difference_is_inconclusive_never_same():
    """With 3 runs a side the smallest exact two-sided p is 0.1: the old rule called a +900 % change
    "same". Now it is inconclusive, and says that 4 runs a side would show it."""
    r = stats.compare_samples([1, 1.1, 1.2], [10, 11, 12], "higher")
    assert (r.verdict, r.p_value, r.runs_needed) == ("inconclusive", pytest.approx(0.1), 4)
    assert r.change_pct == pytest.approx(900) and r.change_low > 500
    # The user task made 3× slower between two tagged sweeps of 3 runs each.
    r = stats.compare_samples([494, 490, 500], [161, 160, 165], "higher")
    assert r.verdict == "inconclusive" and r.runs_needed == 4 and r.change_pct == pytest.approx(-67.4, abs=0.1)
    # 4x at 3 runs a side, either direction, any metric direction: never "same".
    for a, b in (([100, 104, 98], [400, 410, 395]), ([400, 410, 395], [100, 104, 98])):
        for better in ("higher", "lower", "neither"):
            assert stats.compare_samples(a, b, better).verdict == "inconclusive"


def test_n3_absent_and_noisy():
    r = stats.compare_samples([100, 101, 99], [100.5, 99.5, 100], "higher")
    assert r.verdict == "same" and -5 <= r.change_low <= r.change_high <= 5 and not r.unstable
    r = stats.compare_samples([80, 100, 120], [85, 105, 118], "higher")  # CV 20 %: nothing can be shown
    assert r.verdict == "inconclusive" and r.baseline.unstable and r.contender.unstable
    assert r.runs_needed > 4


def test_n5_clear_absent_borderline():
    base = [100, 102, 98, 101, 99]
    r = stats.compare_samples(base, [2 * v for v in base], "higher")
    assert (r.verdict, r.p_value) == ("better", pytest.approx(2 / 252))
    assert stats.compare_samples(base, [2 * v for v in base], "lower").verdict == "worse"
    assert stats.compare_samples(base, [100.5, 101, 99, 100, 99.5], "higher").verdict == "same"
    # +3 % against ±4 % of noise with overlapping runs: not shown either way; more runs would tell.
    r = stats.compare_samples(base, [98, 104, 101, 108, 103], "higher")
    assert r.verdict == "inconclusive" and 5 < r.runs_needed < 30, r


def test_n10_clear_absent_borderline():
    base = [100, 101, 99, 100.5, 99.5, 100.2, 99.8, 100.4, 99.6, 100.1]
    assert stats.compare_samples(base, [v * 1.10 for v in base], "higher").verdict == "better"
    assert stats.compare_samples(base, [v * 1.10 for v in base], "lower").verdict == "worse"
    assert stats.compare_samples(base, list(reversed(base)), "higher").verdict == "same"
    # Shifted by 1 %: shown different (p < 0.001) but within the ±5 % margin: small, never gating...
    r = stats.compare_samples(base, [v * 1.01 for v in base], "higher")
    assert r.p_value < 0.05 and -5 < r.change_low <= r.change_high < 5 and r.verdict == "small"
    # ...unless the user asks for a tighter margin, which its whole interval clears: better.
    r = stats.compare_samples(base, [v * 1.01 for v in base], "higher", margin_pct=0.2)
    assert r.change_low > 0.2 and r.verdict == "better"
    # Shown different, but the interval reaches inside the margin: small (reported, never gating).
    r = stats.compare_samples(base, [v * 1.01 for v in base], "higher", margin_pct=0.9)
    assert r.p_value < 0.05 and r.change_low < 0.9 < r.change_high and r.verdict == "small"
    # Borderline: +4.5 % whose interval reaches past the margin on one side only: small, not the same.
    r = stats.compare_samples(base, [v * 1.045 + (1.5 if i % 2 else -1.5) for i, v in enumerate(base)], "higher")
    assert r.change_low < 5 < r.change_high and r.verdict == "small"


def test_zero_baselines():
    assert stats.compare_samples([0, 0, 0], [0, 0, 0], "lower").verdict == "same"
    r = stats.compare_samples([0, 0, 0, 0, 0], [3, 4, 3, 5, 3], "lower")  # tasks_lost 0 → 3
    assert (r.verdict, r.change_pct) == ("worse", None)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.1, 1e6), min_size=1, max_size=8),
    st.lists(st.floats(0.1, 1e6), min_size=1, max_size=8),
    st.floats(0.5, 50),
)
def test_same_never_says_more_than_the_margin(a, b, margin):
    r = stats.compare_samples(a, b, "higher", margin_pct=margin)
    if r.verdict == "same":
        assert -margin <= r.change_low <= r.change_pct <= r.change_high <= margin
    if r.verdict in ("better", "worse"):
        assert r.p_value <= 0.05 and (r.diff_low > 0 or r.diff_high < 0)
        assert r.change_low is None or r.change_low > margin or r.change_high < -margin
    if r.verdict == "small":
        assert r.p_value <= 0.05 and not (r.change_low > margin or r.change_high < -margin)
        assert (len(a), len(b)) != (3, 3)  # the exact p cannot reach 0.05 at 3 a side
    if min(len(a), len(b)) < 3:
        assert r.verdict == "n too small"


def test_unstable_is_a_cv_over_ten_percent():
    assert not stats.summarize([100, 105, 95]).unstable  # CV 5 %
    assert stats.summarize([100, 125, 75]).unstable  # CV 25 %
    assert not stats.summarize([7.0]).unstable and not stats.summarize([0, 0, 0]).unstable


# -- selections and the database -----------------------------------------------------------------


def test_parse_selection():
    assert parse_selection("quickstart") == Selection("quickstart")
    assert parse_selection("q:broker=redis, concurrency=4") == Selection(
        "q", (("broker", "redis"), ("concurrency", "4"))
    )
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


def test_identical_selections_are_the_same_where_the_runs_show_it(known_db):
    """Two sides are resampled apart: a cell against itself is "same" when its runs are tight enough
    to hold the change within ±5 %; its latency (CV 16 %) cannot, so that is inconclusive."""
    got, res = by_metric(known_db, "k:pool=threads", "k:pool=threads")
    for m in got.values():
        assert m.result.p_value == 1.0 and m.result.change_pct == 0
    assert got["consume_rate"].result.verdict == "same"  # CV 1.6 %
    lat = got["latency_p99_s"].result
    assert lat.verdict == "inconclusive" and lat.baseline.unstable and lat.runs_needed > 5
    assert res.warnings == [] and res.notes == []


def test_n_below_three_gives_no_verdict(known_db):
    got, _ = by_metric(known_db, "k:pool=threads", "k:pool=gevent")
    assert got["consume_rate"].result.contender.n == 2
    assert got["consume_rate"].result.verdict == "n too small"


def test_selection_spanning_cells_names_the_dimension(known_db, matrix_db):
    with db.connect(known_db, read_only=True) as con:
        with pytest.raises(
            SelectionError,
            match=r"baseline selects 3 cells: pool in \{gevent, solo, threads\}; "
            r"name one, e.g. k:pool=gevent, or pass --pool-cells",
        ):
            compare(con, parse_selection("k"), parse_selection("k:pool=solo"))
    with db.connect(matrix_db, read_only=True) as con:
        with pytest.raises(
            SelectionError,
            match=r"contender selects 4 cells: pool in \{prefork, threads\}, "
            r"concurrency in \{1, 4\}",
        ):
            compare(
                con,
                parse_selection("exp:broker=redis,pool=threads,concurrency=1"),
                parse_selection("exp:broker=rabbitmq"),
            )


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
            add_run(
                con,
                "h",
                f"r{i}",
                {"broker": "rabbitmq", "heartbeat": heartbeat, "worker.gossip": gossip},
                metrics={"consume_rate": 100.0 * (i + 1)},
            )
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
    contract = {"metric", "baseline", "contender", "change_pct", "p_value", "margin_pct", "verdict"}
    assert all(contract <= set(r) for r in rows)
    rate = next(r for r in rows if r["metric"] == "consume_rate")
    assert set(rate["baseline"]) == {"n", "median", "low", "high", "unstable"}
    assert rate["margin_pct"] == 5.0 and rate["baseline"]["unstable"] is False
    assert (rate["baseline"]["n"], rate["baseline"]["median"], rate["contender"]["median"]) == (5, 100, 200)
    assert rate["verdict"] == "better" and rate["p_value"] < 0.05
    assert "warning: hosts differ: kernel" in p.stderr
    p = cmx("compare", "k:pool=threads", "k:pool=solo", "--db", str(known_db), "--format", "csv")
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(p.stdout))}
    assert rows["consume_rate"]["verdict"] == "better" and rows["consume_rate"]["contender_n"] == "5"
    p = cmx("compare", "k:pool=threads", "k:pool=solo", "--db", str(known_db), "--format", "markdown")
    assert "| consume_rate | higher | 100/s [" in p.stdout and "(n=5) | +100.0% [" in p.stdout
    assert "| 0.008 | ▲ better |" in p.stdout
    p = cmx("compare", "k:pool=threads", "k:pool=solo", "--db", str(known_db))
    assert p.returncode == 0 and "▲ better" in p.stdout and "bootstrap" in p.stdout


def test_cli_exit_2_on_a_mixture(known_db, matrix_db):
    p = cmx("compare", "k", "k:pool=solo", "--db", str(known_db))
    assert p.returncode == 2 and "baseline selects 3 cells: pool in {gevent, solo, threads}" in p.stderr
    assert "Traceback" not in p.stderr
    p = cmx("compare", "exp:colour=red", "exp", "--db", str(matrix_db))
    assert p.returncode == 2 and "not a dimension" in p.stderr
    p = cmx(
        "compare", "exp:broker=redis", "exp:broker=rabbitmq", "--db", str(matrix_db), "--pool-cells", "--format", "json"
    )
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
        con.execute(
            view.replace(
                "CREATE VIEW runs AS SELECT",
                "CREATE OR REPLACE VIEW runs AS SELECT CASE WHEN s.repeat > 3 THEN 2 ELSE 1 END AS revision,",
                1,
            )
        )
    with db.connect(path, read_only=True) as con:
        assert "revision" in [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
        with pytest.raises(
            SelectionError,
            match=r"baseline selects runs of more than one revision: "
            r"revision in \{1, 2\}; name one, e.g. v:pool=threads,revision=1, or pass --pool-cells",
        ):
            compare(con, parse_selection("v:pool=threads"), parse_selection("v:pool=solo,revision=2"))
        res = compare(con, parse_selection("v:pool=threads,revision=2"), parse_selection("v:pool=solo,revision=2"))
        rate = next(m for m in res.metrics if m.metric == "consume_rate").result
        assert (rate.baseline.n, rate.baseline.median, rate.contender.median) == (3, 104, 204)


def test_cli_gate_metric_and_margin(known_db):
    """--fail-on worse exits 1 only on a metric shown worse; --metric narrows what is compared and gated."""
    gate = ("--db", str(known_db), "--format", "json", "--fail-on", "worse")
    p = cmx("compare", "k:pool=solo", "k:pool=threads", *gate)  # half the rate: worse
    assert p.returncode == 1 and "worse: consume_rate" in p.stderr, p.stderr
    p = cmx("compare", "k:pool=threads", "k:pool=solo", *gate)  # twice the rate: better
    assert p.returncode == 0, p.stderr
    p = cmx("compare", "k:pool=solo", "k:pool=threads", *gate, "--metric", "tasks_lost")
    assert p.returncode == 0 and [r["metric"] for r in json.loads(p.stdout)] == ["tasks_lost"]
    p = cmx("compare", "k:pool=solo", "k:pool=threads", "--db", str(known_db), "--metric", "no_such")
    assert p.returncode == 2 and "--metric no_such: neither side has it" in p.stderr and "Traceback" not in p.stderr
    p = cmx("compare", "k:pool=threads", "k:pool=threads", "--db", str(known_db), "--format", "json", "--margin", "40")
    lat = next(r for r in json.loads(p.stdout) if r["metric"] == "latency_p99_s")
    assert (lat["margin_pct"], lat["verdict"], lat["baseline"]["unstable"]) == (40.0, "same", True)
    p = cmx("compare", "k:pool=threads", "k:pool=threads", "--db", str(known_db), "--format", "markdown")
    assert "? inconclusive: 171 runs a side would tell (unstable baseline and contender)" in p.stdout, p.stdout


def test_a_gate_that_cannot_fail_says_so_and_inconclusive_fails_it(tmp_path):
    """Issue 37: 3× slower at 3 runs a side can never be shown (the exact p is never below 0.1): the
    gate says so on stderr naming the runs a side would need, and worse,inconclusive fails on it."""
    path = tmp_path / "t.duckdb"
    with db.connect(path) as con:
        for pool, factor in (("threads", 1.0), ("solo", 3.0)):
            for i in range(3):
                add_run(
                    con,
                    "t",
                    f"{pool}-{i}",
                    {"broker": "redis", "pool": pool, "concurrency": 4},
                    repeat=i + 1,
                    metrics={"consume_rate": 900.0 / factor + i, "harness_overhead_s": 1.0 + i},
                )
    sides = ("compare", "t:pool=threads", "t:pool=solo", "--db", str(path))
    p = cmx(*sides, "--fail-on", "worse")
    assert p.returncode == 0 and "cannot fail" in p.stderr and "4 ok runs a side would allow one" in p.stderr, p.stderr
    p = cmx(*sides, "--fail-on", "worse,inconclusive")
    assert p.returncode == 1 and "inconclusive: consume_rate" in p.stderr, p.stderr
    assert "harness_overhead_s" not in p.stderr  # cmx's own cost never gates
    p = cmx(*sides, "--fail-on", "worse,sometimes")
    assert p.returncode == 2 and "expected worse or worse,inconclusive" in p.stderr and "Traceback" not in p.stderr

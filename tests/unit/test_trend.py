"""``cmx trend`` on hand-made histories: points per sweep or tag value, E-divisive change points
kept under compare's rule, and the latest point flagged the night it changes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cmx.analysis import stats
from cmx.analysis.compare import SelectionError
from cmx.analysis.trend import WINDOW, at_sweep_end, change_points, latest_verdicts, trend
from cmx.analysis.trend_format import as_json, as_markdown
from cmx.engine.results import db
from tests.results_fixture import HISTORY_CELL as CELL, add_run, history

OTHER = {**CELL, "pool": "solo"}


def _changes(res, metric="consume_rate", cell=0):
    s = [s for s in res.series if s.metric == metric][cell]
    return [(c.at, c.comparison.verdict, round(c.comparison.change_pct)) for c in s.changes]


def test_a_slower_last_night_is_flagged_that_night_and_the_quiet_nights_are_not(tmp_path):
    path = history(tmp_path / "r.duckdb", [1000, 1003, 998, 700])
    with db.connect(path) as con:
        res = trend(con, "e")
    assert _changes(res) == [("s004", "worse", -30)]
    assert _changes(res, "latency_p99_s") == [("s004", "worse", 43)]
    s = res.series[0]
    assert s.ats == ["s001", "s002", "s003", "s004"] and [p.n for p in s.summaries] == [3, 3, 3, 3]
    assert s.summaries[3].median == pytest.approx(700) and s.summaries[3].low <= 700 <= s.summaries[3].high
    # The last night's 3 runs against the 9 before: p can reach 2/C(12, 3); 3 against 3 could not.
    assert res.series[0].changes[0].comparison.p_value == pytest.approx(2 / 220)


def test_a_sweeps_end_computes_the_history_from_its_second_point_and_sees_that_nights_change(tmp_path):
    with db.connect(history(tmp_path / "one.duckdb", [1000])) as con:
        assert at_sweep_end(con, "e", 1) is None  # one point: no history yet
    with db.connect(history(tmp_path / "r.duckdb", [1000, 1003, 998, 700])) as con:
        res = at_sweep_end(con, "e", 1)
        # What `cmx trend e` shows of the headline (a backlog throughput's: no latency): what gates, said that night.
        assert res is not None and [s.metric for s in res.series] == ["consume_rate"]
        assert as_json(res) == as_json(trend(con, "e", metrics=("consume_rate",)))
        assert at_sweep_end(con, "e", 2) is None  # a revision without sweeps
    assert sorted((s.metric, c.at, c.comparison.verdict) for s, c in latest_verdicts(res)) == [
        ("consume_rate", "s004", "worse")
    ]


def test_unchanged_nights_have_no_change(tmp_path):
    path = history(tmp_path / "r.duckdb", [1000, 1003, 998, 1001, 999, 1002])
    with db.connect(path) as con:
        res = trend(con, "e")
    assert all(not s.changes for s in res.series)


def test_a_step_in_the_middle_is_found_where_it_happened(tmp_path):
    path = history(tmp_path / "r.duckdb", [1000, 1003, 998, 1001, 800, 805, 798, 802])
    with db.connect(path) as con:
        res = trend(con, "e")
    assert _changes(res) == [("s005", "worse", -20)]


def test_by_tag_merges_the_sweeps_of_one_value_in_the_order_they_first_ran(tmp_path):
    tags = {1: {"commit": "b"}, 2: {"commit": "b"}, 3: {"commit": "a"}, 4: {}}  # night 4: untagged
    path = history(tmp_path / "r.duckdb", [1000, 1000, 1000, 1000], tags=tags)
    with db.connect(path) as con:
        res = trend(con, "e", by="tag.commit")
    s = res.series[0]
    assert s.ats == ["b", "a"] and [p.n for p in s.summaries] == [6, 3]


def test_a_resumed_sweep_is_one_point_with_the_sweep_it_resumed(tmp_path):
    path = history(tmp_path / "r.duckdb", [1000, 1000])
    with db.connect(path) as con:
        db.record_sweep(
            con, "s002b", "e", "e.yaml", "throughput", "", "inv", {}, {"revision": 1}, planned=1, resumes="s002"
        )
        add_run(con, "e", "late", CELL, repeat=4, sweep_id="s002b", metrics={"consume_rate": 1000})
        res = trend(con, "e")
    assert res.series[0].ats == ["s001", "s002"] and [p.n for p in res.series[0].summaries] == [3, 4]


def test_only_metric_and_json_contract(tmp_path):
    path = history(tmp_path / "r.duckdb", [1000, 1003, 998, 700], cells=(CELL, OTHER))
    with db.connect(path) as con:
        res = trend(con, "e", metrics=("consume_rate",), only="pool=solo")
    doc = json.loads(as_json(res))
    assert list(doc) == ["series"] and len(doc["series"]) == 1
    one = doc["series"][0]
    assert list(one) == ["cell_id", "metric", "group", "points", "changes", "latest"]
    assert one["metric"] == "consume_rate" and one["group"] == "headline"
    assert [list(p) for p in one["points"]] == [["at", "n", "median", "low", "high"]] * 4
    assert [p["at"] for p in one["points"]] == ["s001", "s002", "s003", "s004"]
    assert [(c["at"], c["verdict"]) for c in one["changes"]] == [("s004", "worse")]
    assert list(one["changes"][0]) == ["at", "change_pct", "low", "high", "p_value", "p_adjusted", "verdict", "noise"]
    assert "s004: ▼ worse -30.0% [" in as_markdown(res)


def test_bad_input_is_a_selection_error(tmp_path):
    path = history(tmp_path / "r.duckdb", [1000])
    with db.connect(path) as con:
        for kwargs, message in [
            ({"by": "night"}, "expected sweep or tag.KEY"),
            ({"metrics": ("nope",)}, "'nope' is no metric cmx knows"),
            ({"metrics": ("consume_rate", "makespan_s")}, "--metric makespan_s: no ok run"),
            ({"only": "pool"}, "is not DIM=VALUE"),
            ({"only": "colour=red"}, "'colour' is not a dimension"),
        ]:
            with pytest.raises(SelectionError, match=message):
                trend(con, "e", **kwargs)
        with pytest.raises(SelectionError, match="no sweep of experiment 'x'"):
            trend(con, "x")


def test_too_few_runs_make_no_change():
    runs = [[1000.0], [1000.0], [500.0]]
    assert change_points(runs, [1000.0, 1000.0, 500.0], "higher").changes == []


def test_summarize_many_gives_summarizes_numbers():
    rng = np.random.default_rng(3)
    samples = [list(rng.normal(100, 5, size=int(k))) for k in rng.integers(0, 8, size=120)]
    samples += [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 3.0], [5.5, 1e9, 3.0, 2.0]]
    assert stats.summarize_many(samples) == [stats.summarize(s) for s in samples]


def test_cli_json_and_fail_on_worse(tmp_path):
    from tests.conftest import cmx

    path = history(tmp_path / "r.duckdb", [1000, 1003, 998, 700])
    proc = cmx("trend", "e", "--db", str(path), "--format", "json", "--metric", "consume_rate")
    assert proc.returncode == 0, proc.stderr
    assert [c["verdict"] for c in json.loads(proc.stdout)["series"][0]["changes"]] == ["worse"]
    gate = cmx("trend", "e", "--db", str(path), "--fail-on", "worse")
    assert gate.returncode == 1 and "trend: worse: consume_rate of" in gate.stderr, gate.stderr
    quiet = history(tmp_path / "q.duckdb", [1000, 1003, 998, 1001])
    assert cmx("trend", "e", "--db", str(quiet), "--fail-on", "worse").returncode == 0
    bad = cmx("trend", "e", "--db", str(path), "--by", "night")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "expected sweep or tag.KEY" in bad.stderr


def test_json_is_the_text_json_dumps_gives(tmp_path):
    from cmx.analysis.trend_format import as_json

    path = history(tmp_path / "r.duckdb", [1000, 1003, 998, 700])
    with db.connect(path) as con:
        res = trend(con, "e")
    res.series[0].ats[0] = 'a "quoted", odd ü key'
    assert len(res.series) > 1 and res.series[0].changes
    latest = [
        None
        if s.latest is None
        else {
            "at": s.ats[-1],
            "verdict": s.latest.verdict,
            "change_pct": s.latest.change_pct,
            "p_value": s.latest.p_value,
            "runs_needed": s.latest.runs_needed,
        }
        for s in res.series
    ]
    assert as_json(res) == json.dumps(
        {
            "series": [
                {
                    "cell_id": s.cell_id,
                    "metric": s.metric,
                    "group": s.group,
                    "points": [
                        {"at": at, "n": p.n, "median": p.median, "low": p.low, "high": p.high}
                        for at, p in zip(s.ats, s.summaries)
                    ],
                    "changes": [
                        {
                            "at": c.at,
                            "change_pct": c.comparison.change_pct,
                            "low": c.comparison.change_low,
                            "high": c.comparison.change_high,
                            "p_value": c.comparison.p_value,
                            "p_adjusted": c.p_adjusted,
                            "verdict": c.comparison.verdict,
                            "noise": c.noise,
                        }
                        for c in s.changes
                    ],
                    "latest": last,
                }
                for s, last in zip(res.series, latest)
            ]
        },
        indent=2,
    )


def test_a_long_history_is_judged_within_a_window_and_still_flags_the_last_night(tmp_path):
    history(tmp_path / "r.duckdb", [1000 + (n % 3) for n in range(69)] + [700])
    with db.connect(tmp_path / "r.duckdb") as con:
        res = trend(con, "e", metrics=("consume_rate",))
    [change] = res.series[0].changes
    assert (change.at, change.comparison.verdict) == ("s070", "worse")
    assert change.comparison.baseline.n == 3 * WINDOW  # the 30 nights before, not all 69


# --------------------------------------------------------------------------- issue 37: the truth of a change


def _found(path, metric="consume_rate", **kwargs):
    with db.connect(path) as con:
        res = trend(con, "e", **kwargs)
    [s] = [s for s in res.series if s.metric == metric]
    return res, s, [(c.at, c.comparison.verdict, c.comparison.change_pct) for c in s.changes]


@pytest.mark.parametrize(
    "levels, expected",
    [
        ([1000] * 8 + [900] * 8 + [800] * 8, [("s009", "worse", -10.0), ("s017", "worse", -11.1)]),
        ([1000] * 8 + [800] * 8 + [1000] * 8, [("s009", "worse", -20.0), ("s017", "better", 25.0)]),
        # a three-night dip, recovered: still found, both ways, at its true size
        ([1000] * 10 + [700] * 3 + [1000] * 10, [("s011", "worse", -30.0), ("s014", "better", 42.9)]),
    ],
)
def test_each_change_is_measured_between_its_neighbours(tmp_path, levels, expected):
    from tests.results_fixture import nightly

    _, _, found = _found(nightly(tmp_path / "r.duckdb", [{"consume_rate": v} for v in levels]))
    assert [(at, verdict) for at, verdict, _ in found] == [(at, verdict) for at, verdict, _ in expected]
    for (_, _, got), (_, _, true) in zip(found, expected):
        assert abs(got - true) <= 2.0, found  # against the segment since the previous change, not all before


def test_nothing_changed_nothing_found_and_the_gate_passes_every_night(tmp_path):
    from tests.conftest import cmx
    from tests.results_fixture import nightly

    path = nightly(tmp_path / "r.duckdb", [{"consume_rate": 1000.0, "latency_p99_s": 0.2}] * 12, spread=0.03)
    res, s, found = _found(path)
    assert found == [] and all(not x.changes for x in res.series)
    gate = cmx("trend", "e", "--db", str(path), "--fail-on", "worse")
    assert gate.returncode == 0 and gate.stderr == "", gate.stderr


def test_harness_metrics_are_shown_apart_and_never_gate(tmp_path):
    from tests.conftest import cmx
    from tests.results_fixture import nightly

    nights = [{"consume_rate": 1000.0, "harness_overhead_s": 1.0, "sampler_cpu_percent": 1.0}] * 8
    nights += [{"consume_rate": 1000.0, "harness_overhead_s": 3.0, "sampler_cpu_percent": 4.0}]
    path = nightly(tmp_path / "r.duckdb", nights)
    res, s, found = _found(path, "harness_overhead_s")
    assert s.group == "harness" and found and found[-1][1] == "worse"  # shown, in its own group
    assert {x.metric: x.group for x in res.series} == {
        "consume_rate": "headline",
        "harness_overhead_s": "harness",
        "sampler_cpu_percent": "harness",
    }
    gate = cmx("trend", "e", "--db", str(path), "--fail-on", "worse")
    assert gate.returncode == 0, gate.stderr
    doc = json.loads(cmx("trend", "e", "--db", str(path), "--format", "json").stdout)
    assert {x["metric"]: x["group"] for x in doc["series"]}["sampler_cpu_percent"] == "harness"


def test_an_objective_and_thresholds_join_the_headline(tmp_path):
    from tests.results_fixture import nightly

    definition = {"objective": {"minimize": "makespan_s"}, "thresholds": {"broker_connections_max": "<= 9"}}
    path = nightly(
        tmp_path / "r.duckdb",
        [{"makespan_s": 1.0, "broker_connections_max": 4.0, "backend_connections_max": 2.0}] * 3,
        definition=definition,
    )
    with db.connect(path) as con:
        groups = {s.metric: s.group for s in trend(con, "e").series}
    assert groups == {
        "makespan_s": "headline",
        "broker_connections_max": "headline",
        "backend_connections_max": "other",
    }


def test_a_small_change_is_reported_and_never_gates(tmp_path):
    from tests.conftest import cmx
    from tests.results_fixture import nightly

    levels = [1000.0] * 10 + [970.0] * 10  # −3 %: shown with 30 runs a side, inside the ±5 % margin
    path = nightly(tmp_path / "r.duckdb", [{"consume_rate": v} for v in levels], spread=0.005)
    _, _, found = _found(path)
    assert [(at, verdict) for at, verdict, _ in found] == [("s011", "small")]
    assert cmx("trend", "e", "--db", str(path), "--fail-on", "worse").returncode == 0


def test_false_alarms_are_adjusted_together_across_the_nights_series():
    from cmx.analysis import trend as trend_mod

    def series(metric, p):
        cmp = stats.Comparison(
            stats.Summary(3, 1.0, 1.0, 1.0),
            stats.Summary(3, 2.0, 2.0, 2.0),
            100.0,
            90.0,
            110.0,
            0.9,
            1.1,
            p,
            stats.WORSE,
        )
        return trend_mod.Series(
            "c",
            metric,
            "lower",
            ["a", "b"],
            [[1.0] * 3, [2.0] * 3],
            group="headline",
            changes=[trend_mod.Change(1, "b", cmp, "latest")],
        )

    # Ten series: one at p 0.004 alone is a discovery (0.004 × 10 ≤ 0.05), p 0.03 of another is not.
    many = [series("a", 0.004), series("b", 0.03)] + [
        trend_mod.Series("c", f"m{i}", "lower", ["a", "b"], [[1.0], [1.0]], group="headline") for i in range(8)
    ]
    trend_mod._adjust(many)
    assert [len(s.changes) for s in many[:2]] == [1, 0]
    assert many[0].changes[0].p_adjusted == pytest.approx(0.04)


def test_a_gate_that_cannot_fail_says_so(tmp_path):
    from tests.conftest import cmx
    from tests.results_fixture import nightly

    path = nightly(tmp_path / "r.duckdb", [{"consume_rate": 1000.0}, {"consume_rate": 300.0}])
    gate = cmx("trend", "e", "--db", str(path), "--fail-on", "worse")
    assert gate.returncode == 0 and "cannot fail" in gate.stderr and "run(s) at the latest point" in gate.stderr
    assert gate.stderr.count("\n") == 1, gate.stderr
    both = cmx("trend", "e", "--db", str(path), "--fail-on", "worse,inconclusive")
    assert both.returncode == 1 and "cannot fail" in both.stderr, both.stderr
    bad = cmx("trend", "e", "--db", str(path), "--fail-on", "better")
    assert bad.returncode == 2 and "expected worse or worse,inconclusive" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_change_on_a_busier_host_is_labelled_not_hidden(tmp_path):
    from tests.conftest import cmx
    from tests.results_fixture import nightly

    nights = [{"consume_rate": 1000.0, "noise_cpu_share": 0.05}] * 8 + [{"consume_rate": 700.0, "noise_cpu_share": 0.4}]
    path = nightly(tmp_path / "r.duckdb", nights)
    res, s, found = _found(path)
    assert [(at, verdict) for at, verdict, _ in found] == [("s009", "worse")]  # still found, still gating
    assert "busier after" in s.changes[0].noise
    noise_series = [x for x in res.series if x.metric == "noise_cpu_share"]
    assert noise_series and noise_series[0].group == "noise"
    doc = json.loads(cmx("trend", "e", "--db", str(path), "--format", "json", "--metric", "consume_rate").stdout)
    assert "busier after" in doc["series"][0]["changes"][0]["noise"]
    assert cmx("trend", "e", "--db", str(path), "--fail-on", "worse").returncode == 1
    quiet = nightly(tmp_path / "q.duckdb", [{**n, "noise_cpu_share": 0.05} for n in nights])
    assert _found(quiet)[1].changes[0].noise is None


# --------------------------------------------------------------------------- issue 49: the latest night on its own


def test_a_small_latest_change_never_gates_not_even_as_inconclusive(tmp_path):
    from tests.conftest import cmx
    from tests.results_fixture import nightly

    path = nightly(tmp_path / "r.duckdb", [{"consume_rate": v} for v in [1000.0] * 10 + [970.0]], spread=0.005)
    gate = cmx("trend", "e", "--db", str(path), "--fail-on", "worse,inconclusive")
    assert gate.returncode == 0, gate.stderr


def test_a_regression_keeps_failing_the_gate_until_it_is_undone_and_the_gate_names_the_cell(tmp_path):
    """Cost: four histories through the CLI, a process each (~1 s each on an idle machine)."""
    from tests.conftest import cmx
    from tests.results_fixture import nightly

    levels = [1000.0] * 6 + [700.0]
    for extra, fails in (([], True), ([700.0], True), ([700.0, 1000.0], False), ([1000.0], False)):
        path = nightly(tmp_path / f"r{len(extra)}.duckdb", [{"consume_rate": v} for v in levels + extra])
        gate = cmx("trend", "e", "--db", str(path), "--fail-on", "worse")
        assert gate.returncode == int(fails), gate.stderr
        if fails:  # by its dimensions, not its id
            assert "consume_rate of backend=none broker=redis concurrency=4 pool=threads" in gate.stderr
            assert ("worse since s007" in gate.stderr) == bool(extra), gate.stderr


def test_the_latest_night_is_judged_against_the_stable_nights_before_it_not_a_mix_of_levels(tmp_path):
    from tests.conftest import cmx
    from tests.results_fixture import nightly

    # consume_rate 365, 490, 500, then 235/s: a CPU-bound task made 3x slower on the last night
    path = nightly(tmp_path / "r.duckdb", [{"consume_rate": v} for v in (365.0, 490.0, 500.0, 235.0)], spread=0.01)
    gate = cmx("trend", "e", "--db", str(path), "--fail-on", "worse", "-m", "consume_rate")
    assert gate.returncode == 1 and "worse: consume_rate of" in gate.stderr, gate.stderr

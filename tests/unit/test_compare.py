"""`cmx compare` statistics over the fixture matrix, with exact medians."""
from __future__ import annotations

import csv
import io

import pytest

from analysis.compare import Selection, better_direction, compare, parse_selection
from engine import db
from tests.conftest import cmx
from tests.results_fixture import build_matrix


@pytest.fixture(scope="module")
def matrix_db(tmp_path_factory):
    return build_matrix(tmp_path_factory.mktemp("cmp") / "r.duckdb")


def by_metric(path, a, b):
    with db.connect(path, read_only=True) as con:
        return {d.metric: d for d in compare(con, parse_selection(a), parse_selection(b))}


def test_parse_selection():
    assert parse_selection("quickstart") == Selection("quickstart")
    assert parse_selection("q:broker=redis, concurrency=4") == Selection("q", (("broker", "redis"), ("concurrency", "4")))
    for bad in ("", ":broker=redis", "q:broker", "q:=redis"):
        with pytest.raises(ValueError):
            parse_selection(bad)


def test_directions():
    assert [better_direction(m) for m in ("consume_rate", "latency_p99_s", "makespan_s", "peak_pss_bytes",
                                          "tasks_lost", "tasks_published", "broker_connections_max")] == \
        ["higher", "lower", "lower", "lower", "lower", None, None]


def test_two_filters_of_one_experiment(matrix_db):
    got = by_metric(matrix_db, "exp:broker=redis", "exp:broker=rabbitmq")
    rate = got["consume_rate"]
    # redis ok runs: 1011 1012 1041 1042 1111 1112 1141 1142 (the failed run's 1.0 is left out).
    assert (rate.baseline, rate.contender, rate.baseline_runs, rate.contender_runs) == (1076.5, 2076.5, 8, 8)
    assert rate.diff == 1000
    assert rate.diff_pct == pytest.approx(100_000 / 1076.5)
    assert (rate.better, rate.verdict) == ("higher", "better")
    mk = got["makespan_s"]
    assert mk.verdict == "better" and mk.diff < 0     # lower makespan is better
    lost = got["tasks_lost"]
    assert (lost.baseline, lost.contender, lost.verdict, lost.diff_pct) == (0, 0, "same", None)
    assert got["peak_rss_bytes"].baseline == got["peak_rss_bytes"].contender == 264  # (114 + 414) / 2
    conn = got["broker_connections_max"]
    assert (conn.baseline, conn.contender, conn.verdict) == (4.5, 4.5, None)  # (3 + 6) / 2, no direction
    assert "backend_connections_max" not in got  # neither side has it


def test_numeric_dimension_filter_and_worse(matrix_db):
    got = by_metric(matrix_db, "exp:concurrency=4", "exp:concurrency=1,pool=prefork")
    rate = got["consume_rate"]
    # concurrency 4: 1041 1042 1141 1142 2041 2042 2141 2142; prefork at 1: 1011 1012 2011 2012.
    assert (rate.baseline, rate.contender) == (1591.5, 1511.5)
    assert (rate.diff, rate.verdict) == (-80, "worse")
    pss = got["peak_pss_bytes"]
    assert (pss.baseline, pss.contender, pss.verdict) == (209, 59, "better")


def test_errors(matrix_db):
    with db.connect(matrix_db, read_only=True) as con:
        with pytest.raises(ValueError, match="not a dimension"):
            compare(con, parse_selection("exp:colour=red"), parse_selection("exp"))
        with pytest.raises(ValueError, match="no ok runs"):
            compare(con, parse_selection("exp:broker=kafka"), parse_selection("exp"))


def test_filters_match_numbers_as_numbers_and_booleans_in_any_case(tmp_path):
    from tests.results_fixture import add_run

    path = tmp_path / "h.duckdb"
    with db.connect(path) as con:
        for i, (heartbeat, gossip) in enumerate(((0.0, True), (10.0, False))):
            add_run(con, "h", f"r{i}", {"broker": "rabbitmq", "heartbeat": heartbeat, "worker.gossip": gossip},
                    metrics={"consume_rate": 100.0 * (i + 1)})
    # heartbeat is stored as DOUBLE (0.0): the 0 a user types must still match it
    assert by_metric(path, "h:heartbeat=0", "h:heartbeat=10")["consume_rate"].diff == 100
    assert by_metric(path, "h:worker.gossip=True", "h:worker.gossip=false")["consume_rate"].diff == 100
    with db.connect(path, read_only=True) as con:
        with pytest.raises(ValueError, match="heartbeat is a number, got 'off'"):
            compare(con, parse_selection("h:heartbeat=off"), parse_selection("h"))


def test_cli_csv_and_markdown(matrix_db):
    p = cmx("compare", "exp:broker=redis", "exp:broker=rabbitmq", "--db", str(matrix_db), "--format", "csv")
    assert p.returncode == 0, p.stderr
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(p.stdout))}
    assert (rows["consume_rate"]["baseline"], rows["consume_rate"]["contender"], rows["consume_rate"]["verdict"]) == \
        ("1076.5", "2076.5", "better")
    p = cmx("compare", "exp:broker=redis", "exp:broker=rabbitmq", "--db", str(matrix_db), "--format", "markdown")
    assert "| consume_rate | 1,076/s | 2,076/s | +1,000/s | +92.9% | higher | ▲ better |" in p.stdout
    p = cmx("compare", "exp:colour=red", "exp", "--db", str(matrix_db))
    assert p.returncode == 2 and "not a dimension" in p.stderr

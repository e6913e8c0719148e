"""The environment fingerprint: what the worker and driver reported of themselves reaches
``packages``; ``cmx compare`` and ``cmx trend`` name the fact that differs between their sides."""

from __future__ import annotations

import json

from cmx.analysis.compare import compare, parse_selection
from cmx.analysis.trend import trend
from cmx.engine.results import db
from cmx.engine.results.ingest import HostInfo, ingest_run
from cmx.workloads.runtime.fingerprint import PACKAGES, governor
from tests.conftest import cmx
from tests.results_fixture import add_run
from tests.unit.test_trend import history

BASE = {"celery": "5.5.3", "kombu": "5.5.4", "billiard": "4.2.1", "redis": "5.2.1", "amqp": "5.3.1", "pika": None}


def environment(con, run_id, *, governor="performance", kernel="6.8", broker_version="redis 7.0.15", **versions):
    """The hosts row and the worker's and driver's packages rows of one run on one host."""
    con.execute(
        "INSERT INTO hosts (run_id, host, cpu_model, cores, kernel, python, celery, kombu, broker_version, "
        "governor, backend_version) VALUES (?, 'localhost', 'Xeon', 2, ?, '3.11.7', '5.5.3', '5.5.4', "
        "?, ?, 'postgresql 16.4')",
        [run_id, kernel, broker_version, governor],
    )
    for role in ("worker", "driver"):
        for name, version in {**BASE, **versions}.items():
            con.execute("INSERT INTO packages VALUES (?, 'localhost', ?, ?, ?)", [run_id, role, name, version])


def test_compare_names_a_package_version_and_the_governor_that_differ(tmp_path):
    path = tmp_path / "c.duckdb"
    with db.connect(path) as con:
        for pool, env in (("threads", {}), ("solo", {"celery": "5.7.0", "governor": "powersave"})):
            for i in range(5):
                run_id = f"{pool}-{i}"
                add_run(
                    con,
                    "k",
                    run_id,
                    {"broker": "redis", "pool": pool},
                    repeat=i + 1,
                    metrics={"consume_rate": 100.0 + i},
                )
                environment(con, run_id, **env)
    with db.connect(path, read_only=True) as con:
        res = compare(con, parse_selection("k:pool=threads"), parse_selection("k:pool=solo"))
    assert res.warnings == [
        "hosts differ: celery is 5.5.3 in the baseline but 5.7.0 in the contender",
        "hosts differ: governor is performance in the baseline but powersave in the contender",
    ]
    p = cmx("compare", "k:pool=threads", "k:pool=solo", "--db", str(path))
    assert p.returncode == 0, p.stderr
    assert "warning: hosts differ: celery is 5.5.3 in the baseline but 5.7.0 in the contender" in p.stderr
    same = cmx("compare", "k:pool=threads", "k:pool=threads", "--db", str(path))
    assert same.returncode == 0 and "differ" not in same.stderr, same.stderr


def test_a_difference_the_sides_chose_is_no_warning_and_the_others_still_are(tmp_path):
    """broker=redis against broker=rabbitmq: another broker server is the point, another kernel is not."""
    path = tmp_path / "c.duckdb"
    with db.connect(path) as con:
        for broker, server, kernel in (("redis", "redis 7.0.15", "6.8"), ("rabbitmq", "RabbitMQ 3.13.7", "6.1")):
            for i in range(3):
                add_run(
                    con,
                    "k",
                    f"{broker}-{i}",
                    {"broker": broker, "pool": "threads"},
                    repeat=i + 1,
                    metrics={"consume_rate": 1.0},
                )
                environment(con, f"{broker}-{i}", broker_version=server, kernel=kernel)
    with db.connect(path, read_only=True) as con:
        res = compare(con, parse_selection("k:broker=redis"), parse_selection("k:broker=rabbitmq"))
    assert res.warnings == ["hosts differ: kernel is 6.8 in the baseline but 6.1 in the contender"]


def test_a_fact_one_side_never_recorded_is_no_difference(tmp_path):
    """Runs stored before the fingerprint (no packages rows, no governor) take celery and kombu from
    the host's facts, and say nothing of the rest."""
    path = tmp_path / "c.duckdb"
    with db.connect(path) as con:
        for pool in ("threads", "solo"):
            for i in range(3):
                run_id = f"{pool}-{i}"
                add_run(
                    con, "k", run_id, {"broker": "redis", "pool": pool}, repeat=i + 1, metrics={"consume_rate": 1.0}
                )
                if pool == "solo":
                    environment(con, run_id, celery="5.7.0")
                else:
                    con.execute(
                        "INSERT INTO hosts (run_id, host, kernel, celery) VALUES (?, 'h', '6.8', '5.5.3')", [run_id]
                    )
    with db.connect(path, read_only=True) as con:
        res = compare(con, parse_selection("k:pool=threads"), parse_selection("k:pool=solo"))
    assert res.warnings == ["hosts differ: celery is 5.5.3 in the baseline but 5.7.0 in the contender"]


def test_trend_names_each_fact_and_the_point_it_changed_at(tmp_path):
    path = history(tmp_path / "t.duckdb", [1000, 1003, 998, 1001])
    with db.connect(path) as con:
        for night in range(1, 5):
            for repeat in range(1, 4):
                environment(
                    con,
                    f"r{night}-0-{repeat}",
                    celery="5.5.3" if night < 3 else "5.7.0",
                    governor="performance" if night < 4 else "powersave",
                )
    with db.connect(path, read_only=True) as con:
        res = trend(con, "e")
        by_tag = trend(con, "e", by="tag.night")
    assert res.warnings == [
        "celery 5.5.3 → 5.7.0 from sweep s003 on",
        "governor performance → powersave from sweep s004 on",
    ]
    assert by_tag.warnings[0] == "celery 5.5.3 → 5.7.0 from night=3 on"
    p = cmx("trend", "e", "--db", str(path), "--format", "json")
    assert p.returncode == 0, p.stderr
    assert "warning: environments differ: celery 5.5.3 → 5.7.0 from sweep s003 on" in p.stderr
    assert json.loads(p.stdout)["series"]  # the warning is on stderr only: stdout stays JSON


def test_trend_of_one_environment_warns_of_nothing(tmp_path):
    path = history(tmp_path / "t.duckdb", [1000, 1003, 998])
    with db.connect(path) as con:
        for night in range(1, 4):
            for repeat in range(1, 4):
                environment(con, f"r{night}-0-{repeat}")
    with db.connect(path, read_only=True) as con:
        assert trend(con, "e").warnings == []


def test_ingest_stores_what_the_worker_and_the_driver_reported_of_themselves(tmp_path):
    host = tmp_path / "r1" / "w1"
    host.mkdir(parents=True)
    (host / "facts.json").write_text(json.dumps({"kernel": "6.8", "governor": "unknown"}))
    (host / "worker.json").write_text(json.dumps({"ready_at": 1.0, "packages": {**BASE, "celery": "5.7.0"}}))
    (host / "driver.json").write_text(
        json.dumps(
            {"status": "ok", "broker_version": "RabbitMQ 3.13.7", "backend_version": "redis 7.0.15", "packages": BASE}
        )
    )
    with db.connect(tmp_path / "r.duckdb") as con:
        ingest_run(con, "r1", tmp_path / "r1", 0.0, {"w1": HostInfo(groups=("workers", "drivers"))})
        rows = con.execute("SELECT role, name, version FROM packages WHERE run_id = 'r1' AND host = 'w1'").fetchall()
        host_row = con.execute("SELECT governor, broker_version, backend_version FROM hosts").fetchone()
    assert sorted(rows) == sorted(
        [("worker", n, v) for n, v in {**BASE, "celery": "5.7.0"}.items()] + [("driver", n, v) for n, v in BASE.items()]
    )
    assert {n for _, n, _ in rows} == set(PACKAGES)
    assert host_row == ("unknown", "RabbitMQ 3.13.7", "redis 7.0.15")


def test_the_governor_is_read_from_sysfs_and_unknown_where_there_is_none(tmp_path):
    (tmp_path / "g").write_text("schedutil\n")
    assert governor(tmp_path / "g") == "schedutil"
    assert governor(tmp_path / "absent") == "unknown"

"""Ingest and metrics SQL over small hand-made artifacts, with exact expected values."""

from __future__ import annotations

import duckdb
import pytest

from cmx.engine.results import db
from cmx.engine.results.ingest import HostInfo, ingest_run


def csv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *[",".join("" if v is None else str(v) for v in r) for r in rows]]) + "\n")


@pytest.fixture
def artifacts(tmp_path):
    run = tmp_path / "artifacts" / "r1"
    h = run / "w1"
    # 4 tasks published at t=100..103; t1 runs twice (redelivered), t4 never runs.
    csv(
        h / "pub-10.csv",
        "task_id,name,host,pid,intended_at,sent_at",
        [(f"t{i}", "noop", "w1", 10, None, 99 + i) for i in range(1, 5)],
    )
    csv(
        h / "recv-20.csv",
        "task_id,host,pid,received_at",
        [("t1", "w1", 20, 104), ("t2", "w1", 20, 104), ("t3", "w1", 20, 104)],
    )
    csv(
        h / "exec-21.csv",
        "task_id,name,host,pid,sent_at,started_at,finished_at,state,redelivered",
        [
            ("t1", "noop", "w1", 21, 100, 110, 111, "SUCCESS", 0),
            ("t2", "noop", "w1", 21, 101, 111, 112, "SUCCESS", 0),
            ("t3", "noop", "w1", 21, 102, 112, 114, "SUCCESS", 0),
            ("t1", "noop", "w1", 21, 100, 114, 115, "SUCCESS", 1),
        ],
    )
    csv(
        h / "samples.csv",
        "host,pid,role,ts,rss_bytes,pss_bytes,cpu_percent",
        [
            ("w1", 20, "worker", 1.0, 100, 80, 1),
            ("w1", 21, "worker-child", 1.0, 50, 20, 1),
            ("w1", 20, "worker", 2.0, 120, None, 1),
            ("w1", 21, "worker-child", 2.0, 60, None, 1),
            ("w1", 30, "broker", 2.0, 999, 999, 1),
            # PSS read outside the run (before its clock started, after its work drained): no peak of it
            ("w1", 20, "worker", 0.5, 10, 6, 1),
            ("w1", 21, "worker-child", 0.5, 5, 3, 1),
            ("w1", 20, "worker", 3.0, 150, 140, 1),
            ("w1", 21, "worker-child", 3.0, 20, 15, 1),
        ],
    )
    csv(h / "sample_marks.csv", "host,name,ts", [("w1", "clock", 1.0), ("w1", "drain", 2.0)])
    csv(
        h / "peaks.csv",
        "host,pid,role,name,vmhwm_bytes",
        [("w1", 20, "worker", "celery", 130), ("w1", 21, "worker-child", "celery", 70)],
    )
    csv(
        h / "connections.csv",
        "host,role,kind,ts,count",
        [("w1", "broker", "redis", 1.0, 3), ("w1", "broker", "redis", 2.0, 5)],
    )
    (h / "sampler.json").write_text('{"cpu_seconds": 0.5, "wall_seconds": 50}')
    csv(h / "queue.csv", "ts,depth", [(105, 3), (106, 7), (107, 0)])
    (h / "facts.json").write_text('{"cores": 2, "python": "3.11.7", "celery": "5.7.0"}')
    (h / "driver.json").write_text(
        '{"status": "ok", "broker_version": "redis 7.0", "metrics": [["publish_behind", 0, "tasks"]]}'
    )
    return tmp_path, run


def test_metrics_have_exact_values(artifacts):
    tmp, run = artifacts
    with db.connect(tmp / "r.duckdb") as con:
        got = ingest_run(con, "r1", run, 0.0, {"w1": HostInfo(groups=("workers",))})
    m = got.metrics
    assert (
        m["tasks_published"],
        m["tasks_completed"],
        m["tasks_lost"],
        m["tasks_duplicated"],
        m["tasks_redelivered"],
    ) == (4, 3, 1, 1, 1)
    assert m["tasks_unseen"] == 0  # every host's records arrived: the unrun task is LOST
    assert m["publish_rate"] == pytest.approx(4 / 3)  # 4 sent over 100..103
    assert m["consume_rate"] == pytest.approx(4 / 5)  # 4 executions over 110..115
    assert m["makespan_s"] == pytest.approx(5)
    assert m["latency_p50_s"] == pytest.approx(11.5)  # finished - sent: 11, 11, 12, 15
    assert m["peak_rss_bytes"] == 180  # worker + child at the tick t=2
    assert m["peak_pss_bytes"] == 100  # only ticks in the run where every PSS was read
    assert m["worker_vmhwm_max_bytes"] == 130
    assert m["broker_connections_max"] == 5
    assert m["backend_connections_max"] is None
    assert m["queue_depth_max"] == 7
    assert (m["peak_rss_bytes_worker"], m["peak_pss_bytes_worker"]) == (180, 100)  # as peak_*_bytes
    assert (m["peak_rss_bytes_broker"], m["peak_pss_bytes_broker"]) == (999, 999)
    assert m["sampler_cpu_percent"] == pytest.approx(1.0)
    assert m["publish_behind"] == 0
    assert got.driver["status"] == "ok"


def test_a_peak_pss_only_from_readings_inside_the_run(artifacts):
    """PSS read only as the worker started (or after the work) is no peak of the run: not sampled."""
    tmp, run = artifacts
    (run / "w1" / "sample_marks.csv").write_text("host,name,ts\nw1,clock,2.5\n")  # no reading after the clock but t=3
    with db.connect(tmp / "r.duckdb") as con:
        m = ingest_run(con, "r1", run, 0.0, {"w1": HostInfo(groups=("workers",))}).metrics
    assert (m["peak_pss_bytes"], m["peak_pss_bytes_worker"]) == (155, 155)  # a run that never drained: to its end
    (run / "w1" / "sample_marks.csv").unlink()  # no marks: the host was never sampled inside the run
    with db.connect(tmp / "r2.duckdb") as con:
        m = ingest_run(con, "r1", run, 0.0, {"w1": HostInfo(groups=("workers",))}).metrics
    assert m["peak_pss_bytes"] is None and m["peak_rss_bytes"] == 180
    assert "peak_pss_bytes_worker" not in m and m.get("peak_pss_per_slot_bytes") is None


def test_broker_memory_is_summed_over_nodes_per_tick_and_null_without_a_reading(artifacts):
    """A cluster's memory at a tick is the sum over its nodes; a tick a node did not answer (killed)
    is left out, not taken for a drop; the growth is from the first tick; no rows: NULL, not 0."""
    tmp, run = artifacts
    csv(
        run / "w1" / "server_memory.csv",
        "host,role,kind,ts,node,used_bytes",
        [("w1", "broker", "rabbitmq_cluster", 1.0, n, b) for n, b in (("a", 100), ("b", 110), ("c", 120))]
        + [("w1", "broker", "rabbitmq_cluster", 2.0, n, b) for n, b in (("a", 300), ("b", 200), ("c", 150))]
        + [("w1", "broker", "rabbitmq_cluster", 3.0, n, b) for n, b in (("a", 900), ("b", 200))]  # c down
        + [("w1", "backend", "redis", 2.0, "127.0.0.1:6379", 5000)],
    )
    with db.connect(tmp / "r.duckdb") as con:
        m = ingest_run(con, "r1", run, 0.0, {"w1": HostInfo(groups=("workers",))}).metrics
        assert con.execute("SELECT count(*) FROM server_memory WHERE run_id = 'r1'").fetchone() == (9,)
    assert (m["broker_memory_peak_bytes"], m["broker_memory_growth_bytes"]) == (650, 650 - 330)
    (run / "w1" / "server_memory.csv").write_text("host,role,kind,ts,node,used_bytes\n")  # it could not say
    with db.connect(tmp / "r2.duckdb") as con:
        m = ingest_run(con, "r1", run, 0.0, {"w1": HostInfo(groups=("workers",))}).metrics
    assert "broker_memory_peak_bytes" in m and m["broker_memory_peak_bytes"] is None
    assert m["broker_memory_growth_bytes"] is None


def test_tasks_rows_one_per_execution_and_lost_ones_kept(artifacts):
    tmp, run = artifacts
    with db.connect(tmp / "r.duckdb") as con:
        ingest_run(con, "r1", run, 0.0, {"w1": HostInfo(groups=("workers",))})
        rows = con.execute(
            "SELECT task_id, state, received_at, redelivered FROM tasks ORDER BY task_id, started_at"
        ).fetchall()
        hosts = con.execute("SELECT host, groups, cores, broker_version FROM hosts").fetchall()
    assert rows == [
        ("t1", "SUCCESS", 104, False),
        ("t1", "SUCCESS", 104, True),
        ("t2", "SUCCESS", 104, False),
        ("t3", "SUCCESS", 104, False),
        ("t4", "LOST", None, False),
    ]
    assert hosts == [("w1", "workers", 2, "redis 7.0")]


@pytest.mark.parametrize("why", ["no records", "cut pack"])
def test_a_host_whose_records_are_missing_leaves_unrun_tasks_unseen_not_lost(artifacts, why):
    """w2 ran tasks too, but its records never arrived: t4 may have run there. It is UNSEEN,
    tasks_lost is unknown (NULL), and what was seen still adds up."""
    tmp, run = artifacts
    hosts = {"w1": HostInfo(groups=("workers",)), "w2": HostInfo(groups=("workers",))}
    if why == "cut pack":
        (run / "w2").mkdir()
        hosts["w2"] = HostInfo(groups=("workers",), collected=False)
    with db.connect(tmp / "r.duckdb") as con:
        m = ingest_run(con, "r1", run, 0.0, hosts).metrics
        states = con.execute("SELECT task_id, state FROM tasks WHERE state <> 'SUCCESS'").fetchall()
        host_done = con.execute("SELECT count(*) FROM tasks WHERE host IS NOT NULL").fetchone()[0]
    assert states == [("t4", "UNSEEN")]
    assert (m["tasks_published"], m["tasks_completed"], m["tasks_unseen"], m["tasks_lost"]) == (4, 3, 1, None)
    assert (m["tasks_duplicated"], m["tasks_failed"], m["makespan_s"]) == (1, 0, 5)  # as when all arrived
    assert host_done == 4


def test_warmup_leaves_early_tasks_out_of_rates_not_counts(artifacts):
    tmp, run = artifacts
    with db.connect(tmp / "r.duckdb") as con:
        # drops t1 (sent 100) and t2 (sent 101)
        m = ingest_run(con, "r1", run, 1.5, {"w1": HostInfo(groups=())}).metrics
    assert m["tasks_published"] == 4
    assert m["latency_p50_s"] == pytest.approx(12)  # only t3: 114 - 102
    assert m["publish_rate"] == pytest.approx(2 / 1)  # t3, t4 sent at 102, 103


def test_runs_view_has_a_typed_column_per_dimension(tmp_path):
    path = tmp_path / "r.duckdb"
    with db.connect(path) as con:
        for i, dims in enumerate(
            [
                {"pool": "threads", "concurrency": 4, "params.size_mb": 1.5},
                {"pool": "gevent", "concurrency": 8, "params.size_mb": 3, "celery.task_acks_late": True},
            ]
        ):
            db.record_run_start(
                con,
                experiment="e",
                sweep_id="s",
                run_id=f"r{i}",
                cell_id=f"c{i}",
                repeat=1,
                workload="w",
                dims=dims,
                params={},
                warmup_s=0,
            )
        db.record_run_end(con, "r0", "ok", None, {})
        rows = con.execute(
            'SELECT run_id, status, error IS NULL, pool, concurrency + 1, "params.size_mb", '
            '"celery.task_acks_late" FROM runs ORDER BY run_id'
        ).fetchall()
        types = dict(
            con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'runs'").fetchall()
        )
    assert rows == [
        ("r0", "ok", True, "threads", 5, 1.5, None),
        ("r1", "failed", False, "gevent", 9, 3.0, True),
    ]  # no end recorded: failed, with a reason
    assert types["concurrency"] == "BIGINT" and types["params.size_mb"] == "DOUBLE"
    assert types["celery.task_acks_late"] == "BOOLEAN"
    ro = duckdb.connect(str(path), read_only=True)
    assert ro.execute("SELECT count(*) FROM cmx_schema").fetchone()[0] >= 9
    ro.close()


def test_two_drivers_each_queue_sample_on_its_own_clock_and_each_drivers_behind_stored(tmp_path):
    """Two drivers (d1 leads, d2 publishes its share): a queue-depth sample moves by the offset
    of the driver host that took it, not by either publisher's; publish_behind is the run's sum
    and each driver's own is kept in driver_metrics."""
    run = tmp_path / "artifacts" / "r1"
    for host, offset, behind in (("d1", 0.0, 2), ("d2", 5.0, 3)):
        h = run / host
        csv(
            h / "pub-10.csv",
            "task_id,name,host,pid,intended_at,sent_at",
            [(f"{host}t{i}", "noop", host, 10, 100 + i + offset, 100 + i + offset) for i in range(2)],
        )
        csv(h / "queue.csv", "ts,depth", [(110 + offset, 4 if host == "d1" else 6)])
        (h / "facts.json").write_text(f'{{"clock_offset_s": {offset}, "clock_uncertainty_s": 0.001}}')
        (h / "driver.json").write_text(f'{{"status": "ok", "metrics": [["publish_behind", {behind}, "tasks"]]}}')
    w = run / "w1"
    csv(
        w / "exec-21.csv",
        "task_id,name,host,pid,sent_at,started_at,finished_at,state,redelivered",
        [
            (f"{d}t{i}", "noop", "w1", 21, 100 + i, 101 + i, 102 + i, "SUCCESS", 0)
            for d in ("d1", "d2")
            for i in range(2)
        ],
    )
    (w / "facts.json").write_text('{"clock_offset_s": 0.0, "clock_uncertainty_s": 0.001}')
    hosts = {
        "d1": HostInfo(groups=("drivers",)),
        "d2": HostInfo(groups=("drivers",)),
        "w1": HostInfo(groups=("workers",)),
    }
    with db.connect(tmp_path / "r.duckdb") as con:
        m = ingest_run(con, "r1", run, 0.0, hosts, ("d1", "d2")).metrics
        depths = con.execute("SELECT host, ts, depth FROM queue_depth_times ORDER BY host").fetchall()
        own = con.execute("SELECT host, name, value, unit FROM driver_metrics ORDER BY ALL").fetchall()
    assert depths == [("d1", 110.0, 4), ("d2", 110.0, 6)]  # both taken at controller time 110
    assert m["publish_behind"] == 5
    assert [(h, n, v, u) for h, n, v, u in own if n == "publish_behind"] == [
        ("d1", "publish_behind", 2.0, "tasks"),
        ("d2", "publish_behind", 3.0, "tasks"),
    ]
    assert sorted(h for h, n, _, _ in own if n == "publish_rate") == ["d1", "d2"]


def test_queue_samples_stored_before_the_host_column_keep_the_publishers_clock(tmp_path):
    """A row without a host (a database of an earlier release) is moved as before: by the run's publisher."""
    with db.connect(tmp_path / "r.duckdb") as con:
        con.execute("INSERT INTO hosts (run_id, host, groups, clock_offset_s) VALUES ('r0', 'd1', 'drivers', 2.0)")
        con.execute("INSERT INTO tasks (run_id, task_id, host, publisher_host) VALUES ('r0', 't', 'w1', 'd1')")
        con.execute("INSERT INTO queue_depth (run_id, ts, depth) VALUES ('r0', 12.0, 1)")
        assert con.execute("SELECT ts, host FROM queue_depth_times").fetchall() == [(10.0, None)]

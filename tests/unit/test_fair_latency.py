"""Latency from the intended send time, queue wait / service time, and host clock offsets applied
(engine/results/sql/metrics.sql over engine/results/sql/task_times.sql), on hand-made artifacts with exact values."""

from __future__ import annotations

import json

import pytest

from cmx.engine.results import db
from cmx.engine.results.ingest import HostInfo, ingest_run


def csv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *[",".join("" if v is None else str(v) for v in r) for r in rows]]) + "\n")


def _run(tmp_path, driver_clock, worker_clock, intended=True):
    """Driver d1 publishes t1..t4 (meant at 100..103, sent 1 s late each) which worker w1 runs:
    started 5 s after the intended time, finished 1 s later, in controller time. Each host's
    stamps are written on its own clock (controller time + its offset)."""
    run = tmp_path / "artifacts" / "r1"
    d_off, d_u = driver_clock
    w_off, w_u = worker_clock
    d_off, w_off = d_off or 0.0, w_off or 0.0  # unknown (None) in facts.json; the clock itself is right
    csv(
        run / "d1" / "pub-10.csv",
        "task_id,name,host,pid,intended_at,sent_at",
        [(f"t{i}", "noop", "d1", 10, (99 + i + d_off) if intended else None, 100 + i + d_off) for i in range(1, 5)],
    )
    csv(
        run / "w1" / "exec-21.csv",
        "task_id,name,host,pid,sent_at,started_at,finished_at,state,redelivered",
        [
            (f"t{i}", "noop", "w1", 21, 100 + i + d_off, 104 + i + w_off, 105 + i + w_off, "SUCCESS", 0)
            for i in range(1, 5)
        ],
    )
    for host, off, u in (("d1", driver_clock[0], d_u), ("w1", worker_clock[0], w_u)):
        (run / host / "facts.json").write_text(json.dumps({"clock_offset_s": off, "clock_uncertainty_s": u}))
    (run / "d1" / "driver.json").write_text('{"status": "ok"}')
    with db.connect(tmp_path / "r.duckdb") as con:
        m = ingest_run(
            con, "r1", run, 0.0, {"d1": HostInfo(groups=("drivers",)), "w1": HostInfo(groups=("workers",))}
        ).metrics
        raw = con.execute("SELECT min(started_at) FROM tasks").fetchone()[0]
    return m, raw


def test_latency_counts_from_the_intended_send_and_splits_into_wait_and_service(tmp_path):
    m, _ = _run(tmp_path, (0.0, 0.0), (0.0, 0.0))
    assert m["latency_p50_s"] == pytest.approx(6)  # finished - intended (sent is 1 s later)
    assert m["latency_p99_s"] == pytest.approx(6)
    assert m["queue_wait_p50_s"] == pytest.approx(5)  # started - intended
    assert m["queue_wait_p95_s"] == pytest.approx(5)
    assert m["service_time_p50_s"] == pytest.approx(1)  # finished - started
    assert m["service_time_p99_s"] == pytest.approx(1)
    assert m["send_lag_p99_s"] == pytest.approx(1)
    assert (m["clock_uncertainty_s"], m["clock_uncorrected_tasks"], m["clock_suspect"]) == (0, 0, 0)


def test_without_an_intended_time_latency_counts_from_the_send(tmp_path):
    m, _ = _run(tmp_path, (0.0, 0.0), (0.0, 0.0), intended=False)
    assert m["latency_p50_s"] == pytest.approx(5)
    assert m["queue_wait_p50_s"] == pytest.approx(4)


def test_host_clock_offsets_are_applied_and_raw_stamps_kept(tmp_path):
    # The worker's clock runs 30 s behind the controller's, the driver's 2 s ahead.
    m, raw_start = _run(tmp_path, (2.0, 0.001), (-30.0, 0.002))
    assert m["latency_p50_s"] == pytest.approx(6)
    assert m["queue_wait_p50_s"] == pytest.approx(5)
    assert m["service_time_p50_s"] == pytest.approx(1)
    assert raw_start == pytest.approx(105 - 30)  # `tasks` keeps what the worker recorded
    assert m["clock_uncertainty_s"] == pytest.approx(0.003)
    assert m["clock_suspect"] == 0  # 3 ms against a 6 s latency


def test_large_clock_uncertainty_or_an_unknown_offset_flags_the_run(tmp_path):
    m, _ = _run(tmp_path, (0.0, 0.5), (0.0, 0.5))  # ±1 s against a 6 s median: > 10 %
    assert m["clock_suspect"] == 1
    m, _ = _run(tmp_path / "b", (0.0, None), (None, None))
    assert m["clock_uncorrected_tasks"] == 4 and m["clock_suspect"] == 1


def test_per_slot_memory_of_a_preforking_pool(tmp_path):
    run = tmp_path / "artifacts" / "r1"
    # Parent 20 and two children; PSS read on tick 1 only.
    csv(
        run / "w1" / "samples.csv",
        "host,pid,role,ts,rss_bytes,pss_bytes,cpu_percent",
        [
            ("w1", 20, "worker", 1.0, 100, 80, 1),
            ("w1", 21, "worker-child", 1.0, 50, 20, 1),
            ("w1", 22, "worker-child", 1.0, 70, 30, 1),
            ("w1", 20, "worker", 2.0, 100, None, 1),
            ("w1", 21, "worker-child", 2.0, 90, None, 1),
            ("w1", 22, "worker-child", 2.0, 90, None, 1),
        ],
    )
    csv(run / "w1" / "sample_marks.csv", "host,name,ts", [("w1", "clock", 1.0), ("w1", "drain", 2.0)])
    with db.connect(tmp_path / "r.duckdb") as con:
        m = ingest_run(con, "r1", run, 0.0, {"w1": HostInfo(groups=("workers",))}).metrics
    assert m["peak_pss_per_slot_bytes"] == 25  # (20 + 30) / 2 children
    assert m["peak_rss_per_slot_bytes"] == 90  # tick 2: (90 + 90) / 2


def test_no_per_slot_memory_without_children(tmp_path):
    m, _ = _run(tmp_path, (0.0, 0.0), (0.0, 0.0))
    assert "peak_pss_per_slot_bytes" not in m


def test_a_batch_is_stamped_over_its_round_trip_the_last_at_the_acknowledgement():
    from cmx.workloads.catalog.throughput_raw import TASK_NAME, stamp_batch

    pubs: list = []
    stamp_batch(pubs, [("a", ""), ("b", ""), ("c", ""), ("d", 7.0)], began=10.0, acked=12.0, host="h", pid=1)
    assert [p[5] for p in pubs] == [10.5, 11.0, 11.5, 12.0]
    assert pubs[3] == ("d", TASK_NAME, "h", 1, 7.0, 12.0)

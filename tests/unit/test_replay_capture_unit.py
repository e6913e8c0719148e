"""Recorder folds Celery task events into one row per task; broker_url keeps passwords off argv."""

from __future__ import annotations

import pytest

from cmx.engine.errors import InputError
from cmx.engine.replay import capture


def test_events_fold_into_one_row_per_task_with_sizes_not_content():
    rec = capture.Recorder()
    rec(
        {
            "type": "task-sent",
            "uuid": "a",
            "name": "t.x",
            "queue": "q1",
            "timestamp": 10.0,
            "args": "('secret-ish',)",
            "kwargs": "{}",
            "root_id": "a",
        }
    )
    rec({"type": "task-received", "uuid": "a", "timestamp": 10.5})
    rec({"type": "task-retried", "uuid": "a", "timestamp": 10.6})
    rec({"type": "task-succeeded", "uuid": "a", "timestamp": 11.0, "runtime": 0.25})
    rec({"type": "worker-heartbeat", "hostname": "w"})
    (row,) = rec.rows()
    assert rec.events == 4
    assert (row["name"], row["queue"], row["sent"], row["succeeded"], row["runtime"], row["retries"]) == (
        "t.x",
        "q1",
        10.0,
        11.0,
        0.25,
        1,
    )
    assert row["args_bytes"] == len("('secret-ish',)") and row["args"] is None


def test_queue_filter_and_keep_args():
    rec = capture.Recorder(queues=("q2",), keep_args=True)
    rec({"type": "task-sent", "uuid": "a", "name": "t.x", "queue": "q1", "timestamp": 1.0, "args": "(1,)"})
    rec({"type": "task-sent", "uuid": "b", "name": "t.y", "queue": "q2", "timestamp": 1.0, "args": "(2,)"})
    assert [(r["uuid"], r["args"]) for r in rec.rows()] == [("b", "(2,)")]


def test_password_on_argv_refused_env_allowed(monkeypatch):
    with pytest.raises(InputError, match="CMX_CAPTURE_BROKER_URL"):
        capture.broker_url("amqp://u:pw@h//")
    monkeypatch.setenv("CMX_CAPTURE_BROKER_URL", "amqp://u:pw@h//")
    assert capture.broker_url(None) == "amqp://u:pw@h//"
    assert "pw" not in capture.redact("amqp://u:pw@h//")
    monkeypatch.delenv("CMX_CAPTURE_BROKER_URL")
    with pytest.raises(InputError):
        capture.broker_url(None)


def test_capture_duration_reads_the_experiment_files_durations(tmp_path):
    """`--duration 10m` (the issue's own form) is ten minutes; a duration it cannot read is one line, exit 2,
    before any broker is asked."""
    from tests.conftest import cmx

    from cmx.engine.model.experiment import parse_duration

    assert parse_duration("10m") == 600.0
    proc = cmx(
        "capture", "--duration", "10 parsecs", "--out", str(tmp_path / "p.parquet"), "--broker", "redis://nowhere:1/0"
    )
    assert proc.returncode == 2 and "--duration" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "p.parquet").exists()


def test_arrivals_come_from_sent_events_else_receipts_and_the_profile_says_which(tmp_path):
    from cmx.workloads.catalog.replay_plan import arrival_note, read_rows

    events = [
        {"type": "task-sent", "uuid": "a", "name": "t.x", "queue": "q1", "timestamp": 10.0},
        {"type": "task-received", "uuid": "a", "name": "t.x", "timestamp": 10.4},
        {"type": "task-received", "uuid": "b", "name": "t.x", "timestamp": 10.2},
    ]  # sent before the capture
    by_sent, by_receipt = capture.Recorder(), capture.Recorder(arrivals="received")
    for e in events:
        by_sent(e)
        by_receipt(e)
    assert [(r["uuid"], r["arrival"], r["arrival_source"]) for r in by_sent.rows()] == [
        ("a", 10.0, "sent"),
        ("b", 10.2, "received"),
    ]
    assert [(r["arrival"], r["arrival_source"]) for r in by_receipt.rows()] == [(10.4, "received"), (10.2, "received")]
    capture.write_profile(by_receipt.rows(), tmp_path / "p.parquet")
    rows = read_rows(tmp_path / "p.parquet")
    assert [(r["uuid"], r["arrival"], r["sent"]) for r in rows] == [("b", 10.2, None), ("a", 10.4, 10.0)]
    assert "2 of 2" in arrival_note(rows) and "queue" in arrival_note(rows)
    assert arrival_note(read_rows(_written(by_sent.rows()[:1], tmp_path / "s.parquet"))) is None


def _written(rows, path):
    capture.write_profile(rows, path)
    return path


def test_a_profile_written_before_arrival_columns_still_reads(tmp_path):
    """Profiles without ``arrival``/``arrival_source`` (cmx before them): send, else receipt."""
    import duckdb

    from cmx.engine.replay.profile import summary
    from cmx.workloads.catalog.replay_plan import read_rows

    old = tmp_path / "old.parquet"
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE p (uuid VARCHAR, name VARCHAR, queue VARCHAR, routing_key VARCHAR, sent DOUBLE, "
        "received DOUBLE, started DOUBLE, succeeded DOUBLE, failed DOUBLE, retries INTEGER, runtime DOUBLE, "
        "parent_id VARCHAR, args_bytes BIGINT, kwargs_bytes BIGINT)"
    )
    con.execute(
        "INSERT INTO p VALUES ('a', 't.x', 'q', NULL, 1.0, 1.5, 1.6, 1.7, NULL, 0, 0.1, NULL, 3, 2), "
        "('b', 't.x', 'q', NULL, NULL, 2.0, 2.1, 2.2, NULL, 0, 0.1, NULL, 3, 2)"
    )
    con.execute(f"COPY p TO '{old}' (FORMAT parquet)")
    rows = read_rows(old)
    assert [(r["arrival"], r["arrival_source"]) for r in rows] == [(1.0, "sent"), (2.0, "received")]
    (only,) = summary(old)
    assert only["arrival_source"] == "received+sent" and only["rate_per_s"] == 1.0


def test_an_unknown_arrival_source_is_refused_before_any_broker_is_asked(tmp_path):
    with pytest.raises(InputError, match="--arrivals"):
        capture.capture("redis://nowhere:1/0", tmp_path / "p.parquet", 1.0, arrivals="started")


@pytest.mark.parametrize(
    "argsrepr, items",
    [
        ("([1, 2, 3],)", 3),  # a chord body's header results
        ("([[1, 2], [3]], 5)", 2),
        ("(['a, b', 'c\\'d', \"e]\"],)", 3),  # separators and brackets inside strings do not count
        ("([],)", 0),
        ("([{'a': 1, 'b': 2}],)", 1),
        ("[1, 2]", 2),
        ("(1,)", None),  # a chain's next task: one result
        ("((1, 2),)", None),
        ("()", None),
        ("([1, 2, 3", None),  # cut short (Celery cuts argsrepr at 1,024 characters)
    ],
)
def test_the_list_leading_a_tasks_args_is_counted_off_its_repr(argsrepr, items):
    from cmx.engine.replay.capture import lead_list_len

    assert lead_list_len(argsrepr) == items

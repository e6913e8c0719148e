"""Recorder folds Celery task events into one row per task; broker_url keeps passwords off argv."""
from __future__ import annotations

import pytest

from cmx.engine.errors import InputError
from cmx.engine.replay import capture


def test_events_fold_into_one_row_per_task_with_sizes_not_content():
    rec = capture.Recorder()
    rec({"type": "task-sent", "uuid": "a", "name": "t.x", "queue": "q1", "timestamp": 10.0,
         "args": "('secret-ish',)", "kwargs": "{}", "root_id": "a"})
    rec({"type": "task-received", "uuid": "a", "timestamp": 10.5})
    rec({"type": "task-retried", "uuid": "a", "timestamp": 10.6})
    rec({"type": "task-succeeded", "uuid": "a", "timestamp": 11.0, "runtime": 0.25})
    rec({"type": "worker-heartbeat", "hostname": "w"})
    (row,) = rec.rows()
    assert rec.events == 4
    assert (row["name"], row["queue"], row["sent"], row["succeeded"], row["runtime"], row["retries"]) == \
        ("t.x", "q1", 10.0, 11.0, 0.25, 1)
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
    proc = cmx("capture", "--duration", "10 parsecs", "--out", str(tmp_path / "p.parquet"),
               "--broker", "redis://nowhere:1/0")
    assert proc.returncode == 2 and "--duration" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "p.parquet").exists()

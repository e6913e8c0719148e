"""The stamp recorder and the worker-side signal handlers: every row written exactly once (as
frames during the run, as the CSV layout ingest reads once converted), from threads, across a
fork, and (but for the last flush interval) across a SIGKILL. tests/integration/test_stamps.py runs a
real worker both ways."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from celery import Celery, signals

from cmx.engine.results import db
from cmx.engine.results.ingest import HostInfo, ingest_run
from cmx.workloads.runtime import instrument, recorder as recorder_mod
from cmx.workloads.runtime.recorder import HEADERS, Recorder, write_csv


def read(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_rows_from_many_threads_are_written_once_each_while_flushing(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder_mod, "FLUSH_INTERVAL_S", 0.001)  # the flusher races the writers
    rec = Recorder(tmp_path, "h1")
    per_thread, threads = 20_000, 4

    def write(t):
        for i in range(per_thread):
            rec.add("recv", (f"{t}-{i}", "h1", rec.pid, float(i)))
            if i % 5000 == 0:
                rec.flush()  # and explicit flushes race the flusher

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    rec.flush()
    write_csv(tmp_path)
    rec.add("recv", ("late", "h1", rec.pid, 0.0))  # a row after a conversion: appended, no second header
    rec.flush()
    write_csv(tmp_path)
    rows = read(tmp_path / f"recv-{os.getpid()}.csv")
    assert rows[0] == list(HEADERS["recv"])
    ids = [r[0] for r in rows[1:]]
    assert len(ids) == per_thread * threads + 1 and ids[-1] == "late"
    assert len(set(ids)) == len(ids)
    assert rows.count(list(HEADERS["recv"])) == 1  # one header, however many flushes


def test_a_forked_child_writes_only_its_own_rows(tmp_path):
    rec = Recorder(tmp_path, "h1")
    rec.add("exec", ("parent-row",) + ("x",) * 8)
    pid = os.fork()
    if pid == 0:  # the child: the parent's unflushed row is not the child's to write
        try:
            rec.add("exec", ("child-row",) + ("x",) * 8)
            rec.flush()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    rec.flush()
    write_csv(tmp_path)
    assert [r[0] for r in read(tmp_path / f"exec-{os.getpid()}.csv")[1:]] == ["parent-row"]
    assert [r[0] for r in read(tmp_path / f"exec-{pid}.csv")[1:]] == ["child-row"]


def test_a_sigkilled_process_loses_at_most_the_last_flush_interval(tmp_path):
    """Rows older than one flush interval are on disk when the process is killed with SIGKILL."""
    script = textwrap.dedent(f"""
        import sys, time
        from cmx.workloads.runtime.recorder import Recorder, FLUSH_INTERVAL_S
        rec = Recorder({str(tmp_path)!r}, "h1")
        for i in range(1000):
            rec.add("pub", (f"t{{i}}", "noop", "h1", rec.pid, "", time.time()))
        print(FLUSH_INTERVAL_S, flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        interval = float(proc.stdout.readline())
        time.sleep(2 * interval + 0.5)  # two flusher wake-ups, and some slack for a loaded machine
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    write_csv(tmp_path)
    rows = read(tmp_path / f"pub-{proc.pid}.csv")
    assert len(rows) == 1001 and rows[0] == list(HEADERS["pub"])


@pytest.fixture
def stamped(tmp_path, monkeypatch):
    """The handlers installed on an app, recording into tmp_path (instrument's globals restored)."""
    app = Celery("t", set_as_current=False)

    @app.task(name="t.noop")
    def noop():
        return None

    monkeypatch.setattr(instrument, "_recorder", None)
    monkeypatch.setattr(instrument, "_stamping", True)
    monkeypatch.setattr(instrument, "_started", {})
    monkeypatch.setattr(instrument, "_by_class", False)
    rec = Recorder(tmp_path / "w1", "w1")
    (tmp_path / "w1").mkdir()
    instrument.install(app, rec)
    yield app, rec
    for sig, fn in (
        (signals.before_task_publish, instrument._on_publish),
        (signals.task_received, instrument._on_received),
        (signals.task_prerun, instrument._on_prerun),
        (signals.task_postrun, instrument._on_postrun),
        (signals.worker_process_shutdown, instrument._flush),
        (signals.worker_shutdown, instrument._flush),
        (signals.worker_ready, instrument._on_ready),
    ):
        sig.disconnect(fn)


def test_handlers_record_every_field_and_ingest_reads_them(stamped, tmp_path):
    app, rec = stamped
    task = app.tasks["t.noop"]

    class Req:  # what task_received carries: the worker's Request
        def __init__(self, task_id):
            self.id, self.name = task_id, "t.noop"

    for task_id, redelivered in (("a", False), ("b", True)):
        headers = {"id": task_id, "task": "t.noop"}
        signals.before_task_publish.send(sender="t.noop", headers=headers)
        sent = headers[instrument.SENT_HEADER]
        signals.task_received.send(sender=None, request=Req(task_id))
        task.push_request(id=task_id, delivery_info={"redelivered": redelivered}, cmx_sent_at=sent)
        try:
            signals.task_prerun.send(sender=task, task_id=task_id, task=task, args=(), kwargs={})
            signals.task_postrun.send(
                sender=task, task_id=task_id, task=task, args=(), kwargs={}, retval=None, state="SUCCESS"
            )
        finally:
            task.pop_request()
    rec.flush()
    write_csv(tmp_path / "w1")
    pid = str(os.getpid())
    pub = read(tmp_path / "w1" / f"pub-{pid}.csv")
    recv = read(tmp_path / "w1" / f"recv-{pid}.csv")
    ex = read(tmp_path / "w1" / f"exec-{pid}.csv")
    assert pub[0] == list(HEADERS["pub"]) and recv[0] == list(HEADERS["recv"]) and ex[0] == list(HEADERS["exec"])
    assert [r[:5] for r in pub[1:]] == [["a", "t.noop", "w1", pid, ""], ["b", "t.noop", "w1", pid, ""]]
    assert [r[:3] for r in recv[1:]] == [["a", "w1", pid], ["b", "w1", pid]]
    for row, p, redelivered in zip(ex[1:], pub[1:], ("0", "1")):
        assert row[:4] == [p[0], "t.noop", "w1", pid]
        assert float(row[4]) == float(p[5])  # sent_at: the header the publisher stamped
        assert float(row[4]) <= float(row[5]) <= float(row[6])  # sent <= started <= finished
        assert row[7:] == ["SUCCESS", redelivered]
    # ingest reads them as before
    with db.connect(tmp_path / "r.duckdb") as con:
        ingest_run(con, "r1", tmp_path, 0.0, {"w1": HostInfo(groups=("workers",))})
        got = con.execute(
            "SELECT task_id, redelivered, sent_at IS NOT NULL, received_at IS NOT NULL, "
            "started_at <= finished_at FROM tasks ORDER BY task_id, redelivered"
        ).fetchall()
    assert [g[0] for g in got] == ["a", "b"] and all(g[2] and g[3] and g[4] for g in got)

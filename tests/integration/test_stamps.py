"""Per-task stamps from a real Celery worker, both ways: through cmx's task class (every app cmx
creates) and through Celery's signals (a user's own app). Each way must give the same rows for
the same tasks: every execution once, with its state, in the CSV layout ingest reads, and none
for the harness's wake task."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter

import pytest

from cmx.workloads.runtime.recorder import FRAMES, HEADERS, read_frames, write_csv
from tests.conftest import forget_redis

pytestmark = [pytest.mark.integration]

BROKER = "redis://127.0.0.1:6379/0"

# One process publishes the tasks (stamped by before_task_publish), then consumes them.
WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from celery import Celery
    from celery.exceptions import Ignore
    from kombu import Queue
    from cmx.workloads.runtime import instrument
    from cmx.workloads.runtime.recorder import Recorder

    run_dir, queue, way, pool = sys.argv[1:]
    task_cls = instrument.StampedTask if way == "class" else "celery.app.task:Task"
    app = Celery("s", broker=BROKER, set_as_current=True, task_cls=task_cls)
    app.conf.update(task_default_queue=queue, task_queues=(Queue(queue),), task_ignore_result=True,
                    worker_enable_remote_control=False, worker_hijack_root_logger=False,
                    worker_redirect_stdouts=False)

    @app.task(name="s.ok")
    def ok(i):
        return i

    @app.task(name="s.fail")
    def fail():
        raise ValueError("planned")

    @app.task(name="s.retry", bind=True, max_retries=1, default_retry_delay=0)
    def retry(self):
        raise self.retry(countdown=0)

    @app.task(name="s.ignore")
    def ignore():
        raise Ignore()

    instrument.register_wake(app)
    instrument.install(app, Recorder(Path(run_dir), "h1"))
    print("by_class", instrument._by_class, flush=True)
    assert ok(5) == 5  # a direct call: no execution by a worker, no row
    app.send_task(instrument.WAKE_TASK)  # the harness's: runs first, stamped nowhere
    for i in range(3):
        ok.delay(i)
    for t in (fail, retry, ignore):
        t.delay()
    app.Worker(pool=pool, concurrency=2, without_gossip=True, without_mingle=True, without_heartbeat=True,
               loglevel="ERROR", queues=[queue]).start()
""").replace("BROKER", repr(BROKER))

EXPECTED = Counter(
    {
        ("s.ok", "SUCCESS"): 3,
        ("s.fail", "FAILURE"): 1,
        ("s.retry", "RETRY"): 1,
        ("s.retry", "FAILURE"): 1,
        ("s.ignore", "IGNORED"): 1,
    }
)


def _exec_rows(run_dir) -> int:
    return sum(len(rows) for f in run_dir.glob(f"exec-*{FRAMES}") for rows in read_frames(f))


def read(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("way, pool", [("class", "solo"), ("class", "threads"), ("signals", "solo")])
def test_both_ways_stamp_every_execution_once_with_its_state(tmp_path, way, pool):
    queue = f"cmx-test-stamps.{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tmp_path), queue, way, pool],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout.readline().split() == ["by_class", str(way == "class")]
        deadline = time.monotonic() + 60
        while _exec_rows(tmp_path) < sum(EXPECTED.values()) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)  # a warm shutdown flushes what is left
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        forget_redis(BROKER, queue)
    write_csv(tmp_path)
    assert not list(tmp_path.glob(f"*{FRAMES}"))  # converted and removed
    pid = str(proc.pid)
    pub, recv, ex = (read(tmp_path / f"{kind}-{pid}.csv") for kind in ("pub", "recv", "exec"))
    assert (pub[0], recv[0], ex[0]) == (list(HEADERS["pub"]), list(HEADERS["recv"]), list(HEADERS["exec"]))
    rows = [dict(zip(HEADERS["exec"], r)) for r in ex[1:]]
    assert Counter((r["name"], r["state"]) for r in rows) == EXPECTED  # no cmx.wake among them
    assert {r[1] for r in pub[1:]} == {name for name, _ in EXPECTED}
    sent: dict[str, set[float]] = {}  # the retry's second publish has the first's task id
    for r in pub[1:]:
        sent.setdefault(r[0], set()).add(float(r[5]))
    received = Counter(r[0] for r in recv[1:])
    for r in rows:
        assert (r["host"], r["pid"], r["redelivered"]) == ("h1", pid, "0")
        assert float(r["sent_at"]) in sent[r["task_id"]]  # the header its publisher stamped
        assert float(r["sent_at"]) <= float(r["started_at"]) <= float(r["finished_at"])
    # every execution was received first; the retried task twice
    assert received == Counter(r["task_id"] for r in rows)
    assert all(r[1:3] == ["h1", pid] for r in recv[1:])


def test_frames_cut_short_by_a_kill_lose_only_the_last_frame(tmp_path):
    from cmx.workloads.runtime.recorder import Recorder

    rec = Recorder(tmp_path, "h1")
    for i in range(3):
        rec.add("recv", (f"t{i}", "h1", rec.pid, float(i)))
        rec.flush()
    frames = tmp_path / f"recv-{os.getpid()}{FRAMES}"
    data = frames.read_bytes()
    frames.write_bytes(data[:-5])  # the third flush was being written when the process died
    assert write_csv(tmp_path) == 2
    assert [r[0] for r in read(tmp_path / f"recv-{os.getpid()}.csv")] == ["task_id", "t0", "t1"]

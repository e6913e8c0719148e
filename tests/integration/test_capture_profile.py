"""cmx capture records a real fleet's task events (real worker with -E, real Redis) and
cmx profile show summarises them per task name (issue 40, point 1-2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from tests.conftest import forget_redis

# serial: a capture records every task event on its broker's database, and this module's tests share
# theirs (db 11): two at once counted each other's tasks (350 captured of 200 sent, in parallel).
pytestmark = [pytest.mark.integration, pytest.mark.serial("capture-redis-db11")]

BROKER_DB = 11
URL = f"redis://127.0.0.1:6379/{BROKER_DB}"
CMX = [sys.executable, "-m", "cmx.cli.main"]

APP = textwrap.dedent("""
    import time
    from celery import Celery
    app = Celery("fleet", broker="{url}")
    app.conf.task_send_sent_event = {sent}
    app.conf.worker_send_task_events = True
    app.conf.task_default_queue = "{q}"

    @app.task(name="fleet.fast")
    def fast(x):
        return x

    @app.task(name="fleet.slow")
    def slow(x):
        time.sleep(0.05)
        return x
""")


AMQP = "amqp://guest:guest@127.0.0.1:5672//"


def _fleet(tmp_path, url=URL, sent=True):
    q = f"cap-{uuid.uuid4().hex[:8]}"
    (tmp_path / "fleetapp.py").write_text(APP.format(url=url, q=q, sent=sent))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "fleetapp",
            "worker",
            "-E",
            "-P",
            "solo",
            "-Q",
            q,
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "warning",
        ],
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )
    return worker, q, env


@pytest.fixture
def fleet(tmp_path):
    worker, q, env = _fleet(tmp_path)
    try:
        yield tmp_path, env
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        forget_redis(URL, q)


def _send(tmp_path, env, fast, slow):
    code = (
        "import fleetapp\n"
        f"for i in range({fast}): fleetapp.fast.delay('x' * 100)\n"
        f"for i in range({slow}): fleetapp.slow.delay('y' * 1000)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True, timeout=60)


def test_capture_counts_per_name_and_profile_show(fleet):
    tmp_path, env = fleet
    out = tmp_path / "profile.parquet"
    cap = subprocess.Popen(
        [*CMX, "capture", "--out", str(out), "--duration", "12"],
        env={**os.environ, "CMX_CAPTURE_BROKER_URL": URL},
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)  # the receiver's event queue is bound before the burst
    _send(tmp_path, env, fast=200, slow=20)
    _, stderr = cap.communicate(timeout=60)
    assert cap.returncode == 0, stderr
    assert "events/s" in stderr
    shown = subprocess.run(
        [*CMX, "profile", "show", str(out), "--format", "json"], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    rows = {r["name"]: r for r in json.loads(shown.stdout)}
    assert rows["fleet.fast"]["tasks"] == 200
    assert rows["fleet.slow"]["tasks"] == 20
    assert 0.045 <= rows["fleet.slow"]["runtime_p50"] < 0.2
    assert rows["fleet.slow"]["payload_bytes"] > rows["fleet.fast"]["payload_bytes"]
    table = subprocess.run([*CMX, "profile", "show", str(out)], capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and "fleet.slow" in table.stdout


def test_password_on_argv_is_refused_and_silence_names_the_settings(tmp_path):
    refused = subprocess.run(
        [*CMX, "capture", "--broker", "redis://:s3cret@127.0.0.1:6379/11", "--out", str(tmp_path / "p.parquet")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "CMX_CAPTURE_BROKER_URL" in refused.stderr and "s3cret" not in refused.stderr
    quiet = subprocess.run(
        [
            *CMX,
            "capture",
            "--broker",
            "redis://127.0.0.1:6379/12",
            "--out",
            str(tmp_path / "q.parquet"),
            "--duration",
            "30",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert quiet.returncode == 2
    last = quiet.stderr.strip().splitlines()[-1]
    assert "worker_send_task_events" in last and "task_send_sent_event" in last and "Traceback" not in quiet.stderr


@pytest.mark.parametrize("scheme", ["redis", "amqp"])
def test_unreachable_broker_ends_within_a_bound_with_one_line(tmp_path, scheme):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"{scheme}://guest@127.0.0.1:{port}/"
    began = time.monotonic()
    done = subprocess.run(
        [*CMX, "capture", "--out", str(tmp_path / "p.parquet"), "--duration", "60"],
        env={**os.environ, "CMX_CAPTURE_BROKER_URL": url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert time.monotonic() - began < 30
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach" in lines[0] and str(port) in lines[0], done.stderr
    assert not (tmp_path / "p.parquet").exists()


@pytest.mark.parametrize("url,sent", [(URL, False), (AMQP, True)], ids=["redis-no-sent-events", "rabbitmq-sent"])
def test_the_profile_records_where_arrivals_come_from(tmp_path, url, sent):
    """Without task_send_sent_event (the producer pays nothing) arrivals are the workers' receipts, and the
    profile says so (the queue is unknown then: only task-sent names it); with it they are the sends. On
    RabbitMQ too (the listener reads in batches; its shared vhost is narrowed to this test's queue)."""
    from cmx.workloads.catalog.replay_plan import arrival_note, read_rows

    worker, q, env = _fleet(tmp_path, url, sent)
    try:
        out = tmp_path / "profile.parquet"
        only = ["--queue", q] if sent else []  # Redis db 11 is this test's own
        cap = subprocess.Popen(
            [*CMX, "capture", "--out", str(out), "--duration", "12", *only],
            env={**os.environ, "CMX_CAPTURE_BROKER_URL": url},
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)
        _send(tmp_path, env, fast=150, slow=10)
        _, stderr = cap.communicate(timeout=60)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        from kombu import Connection

        if url.startswith("redis"):
            forget_redis(url, q)
        else:
            with Connection(url) as conn:  # on RabbitMQ the queue outlived the test, with what was not run
                conn.default_channel.queue_delete(q)
    assert cap.returncode == 0, stderr
    rows = read_rows(out)
    assert len(rows) == 160
    want = "sent" if sent else "received"
    assert {r["arrival_source"] for r in rows} == {want}
    assert all(r["arrival"] == r[want] for r in rows)
    assert {r["queue"] for r in rows} == ({q} if sent else {None})
    assert (arrival_note(rows) is None) == sent
    shown = subprocess.run([*CMX, "profile", "show", str(out)], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and f"arrivals from: {want} " in shown.stdout, shown.stdout


def test_a_capture_with_a_password_keeps_it_out_of_stderr_log_and_profile(tmp_path):
    """A successful capture whose URL ($CMX_CAPTURE_BROKER_URL) holds a password: not in its stderr
    (a log file here: its progress is whole lines, issue 51), its stdout, nor the profile's bytes.
    Redis gets an ACL user of this test's own for it (removed after); the worker needs none. About 20 s."""
    import redis

    user, secret = f"cmxcap{uuid.uuid4().hex[:6]}", f"pw{uuid.uuid4().hex}"
    admin = redis.Redis(host="127.0.0.1", port=6379)
    admin.execute_command("ACL", "SETUSER", user, "on", f">{secret}", "~*", "&*", "+@all")
    worker, q, env = _fleet(tmp_path, url="redis://127.0.0.1:6379/13")
    try:
        out, log = tmp_path / "profile.parquet", tmp_path / "capture.log"
        with log.open("w") as stderr:
            cap = subprocess.Popen(
                [*CMX, "capture", "--out", str(out), "--duration", "14"],
                env={**os.environ, "CMX_CAPTURE_BROKER_URL": f"redis://{user}:{secret}@127.0.0.1:6379/13"},
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
            time.sleep(3)
            _send(tmp_path, env, fast=50, slow=5)
            stdout, _ = cap.communicate(timeout=60)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        admin.execute_command("ACL", "DELUSER", user)
        admin.close()
        forget_redis("redis://127.0.0.1:6379/13", q)
    text = log.read_text()
    assert cap.returncode == 0, text
    assert "captured 55 tasks" in stdout
    assert secret not in text and secret not in stdout and secret.encode() not in out.read_bytes()
    lines = text.splitlines()
    assert "\r" not in text and 1 <= len(lines) <= 4 and all("events/s" in line for line in lines), text
    assert f"{user}:***@" in lines[0]

"""The driver's last word to the workers (the ``drain`` mark) survives the broker closing its
connections under it, on a real Redis of the test's own: a Redis Sentinel turning the old master
into a replica (about 10 s after a failover) kills every client connection, which failed a
``failover_broker`` run over SSH in CI ("lost the connection to the broker redis-sentinel ...
Connection closed by server") although its tasks were all accounted for. A broker that stays away
costs the workers' drain mark (said in the run's notes), never the run."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import redis

from tests.faults.brokers import PrivateRedis

pytestmark = pytest.mark.integration


def _context(tmp_path, monkeypatch, url: str):
    monkeypatch.setenv("CMX_BROKER_URL", url)
    monkeypatch.setenv("CMX_BACKEND_URL", "")
    from cmx.workloads.app.factory import create_app
    from cmx.workloads.drive.context import DriveContext
    from cmx.workloads.runtime.spec import RunSpec

    spec = RunSpec(
        run_id="mark" + uuid.uuid4().hex[:8],
        experiment="t",
        cell_id="c",
        repeat=1,
        workload="concurrent_sleep",
        broker="redis",
        driver_hosts=["d1"],
        worker_nodes=["cmx@nobody"],
        queue_expires_s=60,
    )
    app = create_app(spec, tmp_path, "d1", client="driver")
    return DriveContext(app, spec, tmp_path, "d1", deadline=time.monotonic() + 60)


def _later(seconds: float, what) -> threading.Thread:
    def run():
        time.sleep(seconds)
        what()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_the_drain_mark_goes_out_again_when_the_broker_kills_its_clients(tmp_path, monkeypatch):
    with PrivateRedis(tmp_path / "redis") as server:
        ctx = _context(tmp_path, monkeypatch, server.url)
        ctx.completed()  # the pool holds a connection, as after a run's progress polls
        killed = []
        # The mark waits up to 3 s for the workers' replies: the kill falls inside that wait.
        killer = _later(
            1.0,
            lambda: killed.append(redis.Redis(host="127.0.0.1", port=server.port).client_kill_filter(_type="normal")),
        )
        ctx.mark("drain")
        killer.join()
        assert killed and killed[0] >= 1  # the mark's own connection was among those closed
        assert ctx.notes == []  # the second try on a fresh connection went out
        assert (tmp_path / "mark.drain").exists()


def test_a_broker_that_stays_away_costs_the_mark_not_the_run(tmp_path, monkeypatch):
    with PrivateRedis(tmp_path / "redis") as server:
        ctx = _context(tmp_path, monkeypatch, server.url)
        ctx.completed()
        stopper = _later(1.0, server.stop)
        started = time.monotonic()
        ctx.mark("drain")
        stopper.join()
        took = time.monotonic() - started
        server.start()  # for the fixture's own stop
    assert len(ctx.notes) == 1 and ctx.notes[0].startswith("the drain mark did not reach the workers"), ctx.notes
    assert "peak PSS is not sampled" in ctx.notes[0]
    assert took < 60, took

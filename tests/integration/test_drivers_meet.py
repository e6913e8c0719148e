"""Several drivers meet on the run's broker (workloads/drive/drivers.py), on a real Redis and a real
RabbitMQ: the others wait until the leader says the clock started and get its moment; a driver
that fails before it is ready stops the leader's wait at once, naming it; the meeting leaves
nothing on the broker once the run's names are removed."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from cmx.workloads.drive import drivers
from cmx.workloads.vocab import kinds
from cmx.workloads.host.leftovers import names_of
from cmx.workloads.servers import registry as servers

pytestmark = pytest.mark.integration

URLS = {"redis": "redis://127.0.0.1:6379/0", "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//"}


def _remove(broker: str, spec) -> None:
    """What the run's meeting left on the broker, removed as a run's end removes it."""
    servers.get(kinds.BROKERS[broker].service).remove_run("broker", URLS[broker], names_of(spec))


def _app(tmp_path, monkeypatch, broker: str, hosts: list[str]):
    monkeypatch.setenv("CMX_BROKER_URL", URLS[broker])
    monkeypatch.setenv("CMX_BACKEND_URL", "")
    from cmx.workloads.app.factory import create_app
    from cmx.workloads.runtime.spec import RunSpec

    spec = RunSpec(
        run_id="meet" + uuid.uuid4().hex[:8],
        experiment="t",
        cell_id="c",
        repeat=1,
        workload="throughput",
        broker=broker,
        driver_hosts=hosts,
        queue_expires_s=60,
    )
    return create_app(spec, tmp_path, hosts[0], client="driver"), spec


def _nothing(_what: str) -> None:
    return None


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_the_others_start_when_the_leader_says_and_learn_its_clock(tmp_path, monkeypatch, broker):
    app, spec = _app(tmp_path, monkeypatch, broker, ["d1", "d2", "d3"])
    got: dict[str, float] = {}
    try:
        others = [
            threading.Thread(
                target=lambda h=h: got.__setitem__(h, drivers.meet(app, spec, h, time.monotonic() + 30, _nothing))
            )
            for h in ("d2", "d3")
        ]
        for t in others:
            t.start()
        ready = drivers.gather(app, spec, time.monotonic() + 30, _nothing)
        assert sorted(ready) == ["d2", "d3"]
        time.sleep(0.3)
        assert got == {}  # nobody goes before the leader says so
        drivers.release(app, spec, 1234.5)
        for t in others:
            t.join(10)
        assert got == {"d2": 1234.5, "d3": 1234.5}
    finally:
        _remove(broker, spec)
    if broker == "redis":
        import redis

        client = redis.Redis.from_url(URLS["redis"])
        assert [k for k in client.scan_iter(match=f"*{spec.run_id}*")] == []


def test_a_driver_that_fails_before_it_is_ready_ends_the_leaders_wait_naming_it(tmp_path, monkeypatch):
    app, spec = _app(tmp_path, monkeypatch, "redis", ["d1", "d2"])
    try:
        drivers.give_up(app, spec, "d2", "ConnectionError: no route")
        t0 = time.monotonic()
        with pytest.raises(drivers.DriversProblem, match="the driver on d2 failed: ConnectionError: no route"):
            drivers.gather(app, spec, time.monotonic() + 30, _nothing)
        assert time.monotonic() - t0 < 5
    finally:
        _remove("redis", spec)


def test_the_leaders_wait_is_bounded(tmp_path, monkeypatch):
    app, spec = _app(tmp_path, monkeypatch, "redis", ["d1", "d2"])
    try:
        with pytest.raises(drivers.DriversProblem, match="d2 to be ready"):
            drivers.gather(app, spec, time.monotonic() + 1.0, _nothing)
    finally:
        _remove("redis", spec)

"""The driver's error when the broker (or a Redis/PostgreSQL backend) goes away mid-run: it names
the services and where they are, never their credentials (tests/faults/test_broker_restarted.py
shows it on a real restart)."""

from __future__ import annotations

import amqp.exceptions
import redis.exceptions
from kombu.exceptions import OperationalError

from cmx.workloads.app.driver import connection_lost
from cmx.workloads.runtime.spec import RunSpec


def _spec(**kw) -> RunSpec:
    return RunSpec(run_id="r1", experiment="e", cell_id="c", repeat=1, workload="throughput", **kw)


def test_a_lost_broker_is_named_without_its_password(monkeypatch):
    monkeypatch.setenv("CMX_BROKER_URL", "amqp://cmx:s3cret@10.0.0.5:5673//")
    monkeypatch.setenv("CMX_BACKEND_URL", "")
    error = connection_lost(BrokenPipeError(32, "Broken pipe"), _spec(broker="rabbitmq"))
    assert error == (
        "lost the connection to the broker rabbitmq at 10.0.0.5:5673 mid-run: BrokenPipeError: [Errno 32] Broken pipe"
    )
    for exc in (
        redis.exceptions.ConnectionError("Connection closed by server."),
        OperationalError("x"),
        amqp.exceptions.ConnectionForced("shutdown"),
        ConnectionRefusedError(111, "refused"),
    ):
        assert "broker rabbitmq at 10.0.0.5:5673" in connection_lost(exc, _spec(broker="rabbitmq"))
        assert "s3cret" not in connection_lost(exc, _spec(broker="rabbitmq"))


def test_a_redis_backend_is_named_beside_the_broker(monkeypatch):
    monkeypatch.setenv("CMX_BROKER_URL", "redis://:pw@127.0.0.1:6391/0")
    monkeypatch.setenv("CMX_BACKEND_URL", "redis://:pw@127.0.0.1:6392/1")
    error = connection_lost(redis.exceptions.TimeoutError("Timeout reading"), _spec(backend="redis"))
    assert error.startswith(
        "lost the connection to the broker redis at 127.0.0.1:6391 or the backend redis "
        "at 127.0.0.1:6392 mid-run: TimeoutError: Timeout reading"
    ), error


def test_other_errors_keep_their_own_words(monkeypatch):
    monkeypatch.setenv("CMX_BROKER_URL", "redis://127.0.0.1:6379/0")
    assert connection_lost(ValueError("bad"), _spec()) is None
    assert connection_lost(ConnectionError("x"), None) is None  # before the spec was read

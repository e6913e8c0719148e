"""The sampler's connection probes (cmx.workloads.host.sampler) against the real local Redis,
PostgreSQL and RabbitMQ: only the run's own named clients count, and no URL or password is
written. The sampler's process and memory tests, which need no service, are tests/unit/test_sampler.py."""

from __future__ import annotations

import json
import os
import shutil
import time

import pika
import psycopg2
import pytest
import redis

from tests.prereqs import require
from tests.unit.test_sampler import SamplerOutput, sampler  # noqa: F401 (sampler: the fixture)

pytestmark = [pytest.mark.integration]

RUN = "r-conn-test"


def _spec(tmp_path) -> None:
    """The run dir's spec.json: the probes read the run id from it to know the run's client names."""
    (tmp_path / "run").mkdir(parents=True, exist_ok=True)
    (tmp_path / "run" / "spec.json").write_text(json.dumps({"run_id": RUN}))


def _maxima(out: SamplerOutput, role: str) -> dict[str, int]:
    got: dict[str, int] = {}
    for r in out.connections:
        if r["role"] == role:
            got[r["client"]] = max(got.get(r["client"], 0), int(r["count"]))
    return got


def test_redis_counts_only_the_runs_named_clients_and_urls_never_written(tmp_path, sampler):
    _spec(tmp_path)
    url = "redis://127.0.0.1:6379/1?client_name=cmx-sampler-test"
    bad_url = "redis://cmxuser:s3cret-pw-123@127.0.0.1:1/0"  # nothing listens on port 1
    env = {**os.environ, "CMX_BACKEND_URL": url, "CMX_BROKER_URL": bad_url}
    s = sampler("--connections", "backend=redis", "--connections", "broker=redis", "--conn-interval", "0.2", env=env)
    time.sleep(0.5)
    names = (
        [f"cmx.{RUN}.worker.backend"] * 3
        + [f"cmx.{RUN}.driver.backend"]
        + [f"cmx.{RUN}.worker.broker"] * 2  # the run's, but the broker's (same server)
        + [None, None, "cmx.other-run.worker.backend", "someone-else"]
    )  # never the run's
    clients = [redis.Redis(host="127.0.0.1", port=6379, db=i % 2, client_name=n) for i, n in enumerate(names)]
    try:
        for client in clients:
            client.ping()
        time.sleep(1.0)
    finally:
        for client in clients:
            client.close()
    time.sleep(0.3)
    out = s.stop()

    assert len([r for r in out.connections if r["role"] == "backend"]) >= 10  # 2 rows a tick
    assert _maxima(out, "backend") == {"worker": 3, "driver": 1}
    assert all(r["host"] == "h1" and r["kind"] == "redis" for r in out.connections)
    assert not [r for r in out.connections if r["role"] == "broker"]
    errors = out.summary["errors"]
    assert len(errors) == 1 and errors[0].startswith("connections broker=redis: ")  # once, not per probe
    for name, text in out.raw.items():
        for secret in (url, "cmx-sampler-test", bad_url, "s3cret-pw-123", "cmxuser"):
            assert secret not in text, f"{secret!r} written to {name}"


def test_postgres_counts_only_the_runs_named_clients(tmp_path, sampler):
    dsn = "postgresql://postgres@127.0.0.1:5432/postgres"
    _spec(tmp_path)
    # Celery's spelling; trust auth ignores the password, which must still never be written.
    env = {**os.environ, "CMX_BACKEND_URL": "db+postgresql://postgres:pg-pw-789@127.0.0.1:5432/postgres"}
    conns = [
        psycopg2.connect(dsn, application_name=n)
        for n in [f"cmx.{RUN}.worker.backend"] * 3 + ["psql", "cmx.other.worker.backend"]
    ]
    try:
        s = sampler("--connections", "backend=postgres", "--conn-interval", "0.2", env=env)
        time.sleep(1.0)
        out = s.stop()
    finally:
        for conn in conns:
            conn.close()
    assert _maxima(out, "backend") == {"worker": 3, "driver": 0}
    assert out.summary["errors"] == []
    assert not [name for name, text in out.raw.items() if "pg-pw-789" in text]


def test_rabbitmq_counts_only_the_runs_named_clients_with_rabbitmqctl(tmp_path, sampler):
    require(None if shutil.which("rabbitmqctl") else "rabbitmqctl is not installed")
    _spec(tmp_path)

    def connect(name):
        props = {"connection_name": name} if name else None
        return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", client_properties=props))

    conns = [
        connect(n)
        for n in (
            f"cmx.{RUN}.worker.broker",
            f"cmx.{RUN}.worker.broker",
            f"cmx.{RUN}.driver.broker",
            None,
            "cmx.other.worker.broker",
        )
    ]
    env = {k: v for k, v in os.environ.items() if k != "CMX_RABBITMQ_API"}
    try:
        s = sampler("--interval", "0.1", "--connections", "broker=rabbitmq", env=env)
        time.sleep(6.0)  # rabbitmqctl boots an Erlang VM: ~0.5-1 s idle, 2 s and more on a loaded machine
        out = s.stop()
    finally:
        for conn in conns:
            conn.close()
    assert out.summary["errors"] == []
    assert _maxima(out, "broker") == {"worker": 2, "driver": 1}
    assert out.summary["children_cpu_seconds"] > 0  # rabbitmqctl's cost is recorded
    assert out.memory == []  # rabbitmqctl's probe does not say the node's memory: nothing, not 0
    # The memory ticks kept their schedule while rabbitmqctl ran in the probe thread.
    assert out.summary["late_ticks"] <= out.summary["ticks"] // 4


# -- the server's own count of its memory (server_memory.csv) --------------------------------------

MIB = 1 << 20
FILL_MIB = 48  # what a test puts in the server: far above what others using it move it by in seconds


def _memory_by_tick(out: SamplerOutput, role: str = "broker") -> list[tuple[float, int, int]]:
    """(ts, bytes summed over the nodes that answered, how many did) per probe tick, in order."""
    ticks: dict[float, list[int]] = {}
    for r in out.memory:
        if r["role"] == role:
            ticks.setdefault(float(r["ts"]), []).append(int(r["used_bytes"]))
    return [(ts, sum(v), len(v)) for ts, v in sorted(ticks.items())]


def test_redis_memory_is_its_own_used_memory_and_rises_with_a_filled_queue(tmp_path, sampler):
    """INFO memory's used_memory, once a tick: the idle figure first, then a list of 48 large
    values (a queue of large messages) raises it by about their size, and it falls back once gone."""
    _spec(tmp_path)
    db = 11  # a database of its own on the shared Redis
    env = {**os.environ, "CMX_BROKER_URL": f"redis://127.0.0.1:6379/{db}"}
    key = f"cmx.{RUN}.memory-{os.getpid()}"
    client = redis.Redis(host="127.0.0.1", port=6379, db=db)
    s = sampler("--connections", "broker=redis", "--conn-interval", "0.2", env=env)
    try:
        time.sleep(0.8)
        client.rpush(key, *[os.urandom(MIB) for _ in range(FILL_MIB)])
        time.sleep(0.8)
    finally:
        client.delete(key)
        client.close()
    time.sleep(0.8)
    out = s.stop()
    assert out.summary["errors"] == []
    ticks = _memory_by_tick(out)
    assert len(ticks) >= 6 and all(n == 1 for _, _, n in ticks), ticks
    assert {(r["kind"], r["node"]) for r in out.memory} == {("redis", "127.0.0.1:6379")}
    idle, peak, last = ticks[0][1], max(b for _, b, _ in ticks), ticks[-1][1]
    assert peak - idle >= 0.9 * FILL_MIB * MIB, (idle, peak)
    assert peak - last >= 0.9 * FILL_MIB * MIB, (peak, last)  # freed: what it says is what it holds now


def _api(path: str, method: str = "GET", body: dict | None = None):
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:15672/api{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="},
    )  # guest:guest
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read()
    return json.loads(text) if text else None


def test_rabbitmq_memory_is_the_management_apis_mem_used_and_rises_with_a_filled_queue(tmp_path, sampler):
    """/api/nodes mem_used of every running node (here one), at the API's pace: a classic queue
    holding 48 large transient messages raises it by about their size."""
    _spec(tmp_path)
    vhost = f"cmx-memory-{os.getpid()}"
    _api(f"/vhosts/{vhost}", "PUT", {})
    _api(f"/permissions/{vhost}/guest", "PUT", {"configure": ".*", "write": ".*", "read": ".*"})
    env = {**os.environ, "CMX_RABBITMQ_API": "http://guest:guest@127.0.0.1:15672"}
    try:
        s = sampler("--connections", "broker=rabbitmq", "--conn-interval", "0.2", env=env)
        time.sleep(1.5)
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", virtual_host=vhost))
        channel = conn.channel()
        channel.queue_declare("fill", arguments={"x-queue-type": "classic"})
        for _ in range(FILL_MIB):
            channel.basic_publish("", "fill", os.urandom(MIB))
        # mem_used is the node's as of its last stats collection (every 5 s unless configured)
        deadline = time.monotonic() + 20
        while _api(f"/queues/{vhost}/fill").get("messages", 0) < FILL_MIB:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(6.0)
        conn.close()
        out = s.stop()
    finally:
        _api(f"/vhosts/{vhost}", "DELETE")
    assert out.summary["errors"] == []
    nodes = {n["name"] for n in _api("/nodes?columns=name")}
    assert {r["node"] for r in out.memory} == nodes and {r["kind"] for r in out.memory} == {"rabbitmq"}
    ticks = _memory_by_tick(out)
    assert len(ticks) >= 5 and all(n == len(nodes) for _, _, n in ticks), ticks
    # From the lowest tick before the peak: the node's memory may fall on its own first (Erlang
    # collecting what earlier tests left), which the first tick alone would count against the fill.
    top = max(range(len(ticks)), key=lambda i: ticks[i][1])
    # At least 90 % of the fill, as for Redis above: the shared node's memory moves with what other
    # tests on it do meanwhile (in parallel it once rose by 47.9 MiB for the 48 MiB put in).
    assert ticks[top][1] - min(b for _, b, _ in ticks[: top + 1]) >= 0.9 * FILL_MIB * MIB, ticks

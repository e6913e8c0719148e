"""A run leaves nothing on its broker and backend, whatever its end (issue #24 point 6).

Each test works in a Redis database and a RabbitMQ vhost of its own (other sweeps share this
machine's servers), so "before" and "after" are the whole keyspace / vhost, shared tables
included: a run's members of kombu's shared binding tables and ``unacked`` hash count too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import redis

from tests.conftest import CMX, REPO, driving, local_inventory, query, write, rabbit_api

pytestmark = pytest.mark.integration

#: Redis databases of these tests alone (0 and 1: the default inventory; 14: replay fidelity, stamping_parts).
BROKER_DB, BACKEND_DB = 13, 15
TASKS = '''
import time

from celery import shared_task


@shared_task
def boom():
    raise ValueError("this task always fails")


@shared_task
def slow(seconds):
    time.sleep(seconds)
'''


api = rabbit_api


@pytest.fixture
def vhost():
    """A RabbitMQ vhost of the test's own, on which Celery's shared control exchanges exist (as on
    any vhost Celery was used on); deleted after."""
    name = f"cmx-leftovers-{uuid.uuid4().hex[:8]}"
    api("PUT", f"vhosts/{name}")
    api("PUT", f"permissions/{name}/guest", {"configure": ".*", "write": ".*", "read": ".*"})
    from celery import Celery

    app = Celery(broker=f"amqp://guest:guest@127.0.0.1:5672/{name}")
    app.control.ping(timeout=0.2)  # declares celery.pidbox and reply.celery.pidbox
    app.close()
    yield name
    api("DELETE", f"vhosts/{name}")


def rabbit_state(vhost: str) -> tuple[set, set]:
    """(queues with their message counts, exchanges) of the vhost."""
    return {q["name"] for q in api("GET", f"queues/{vhost}")}, {e["name"] for e in api("GET", f"exchanges/{vhost}")}


def redis_state() -> dict[int, set]:
    """Each database's keys; kombu's binding deadlines by member, those of tables already gone left out
    (no one's: kombu drops them, and so may a run's clean-up)."""
    state = {}
    for db in (BROKER_DB, BACKEND_DB):
        client = redis.Redis(db=db)
        keys = set(client.scan_iter(count=1000))
        if keys & {DEADLINES}:
            keys.discard(DEADLINES)
            members = (m for m, _ in client.zscan_iter(DEADLINES, count=1000))
            keys |= {DEADLINES + b":" + m for m in members if client.exists(b"_kombu.binding." + m)}
        state[db] = keys
    return state


DEADLINES = b"_kombu.binding_deadlines"


def inventory(
    root: Path, workdir: Path, vhost: str | None, backend: str = f"redis://127.0.0.1:6379/{BACKEND_DB}"
) -> Path:
    amqp = f"amqp://guest:guest@127.0.0.1:5672/{vhost}" if vhost else "amqp://guest:guest@127.0.0.1:5672//"
    return local_inventory(
        root / "inv.yml",
        workdir / "localhost",
        brokers={
            "broker_url": [f"redis://127.0.0.1:6379/{BROKER_DB}", amqp],
            "rabbitmq_api_url": "http://guest:guest@127.0.0.1:15672",
        },
        backends={"backend_url": backend},
    )


def sweep_until(exp: Path, inv: Path, db: Path, workdir: Path, nth: int, sig: int) -> subprocess.Popen:
    """Start ``cmx run``; once its ``nth`` run has driven for a second (a backlog is queued and
    the worker holds prefetched messages), send ``sig``."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [*CMX, "run", str(exp), "--inventory", str(inv), "--db", str(db)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: set[str] = set()
    deadline = time.monotonic() + 300
    while len(seen) < nth:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"run #{nth} never drove: {out[-2000:]} {err[-2000:]}")
        seen |= driving(workdir)
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(sig)
    return proc


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_failed_timed_out_and_interrupted_runs_leave_the_broker_and_backend_as_they_were(tmp_path, vhost, broker):
    write(tmp_path / "usertasks.py", TASKS)
    # One run whose tasks raise (failed), one whose backlog outlasts run_timeout (timeout), one
    # stopped by Ctrl-C while its backlog waits and its worker holds prefetched messages.
    exp = write(
        tmp_path / "left.yaml",
        f"""
        name: leftovers-{broker}
        workload: {{name: tasks, params: {{module: usertasks.py, mode: backlog}}}}
        fixed: {{broker: {broker}, backend: redis, pool: threads, concurrency: 1, prefetch_multiplier: 4}}
        zip:
          - {{params.task: [usertasks.boom, usertasks.slow, usertasks.slow],
              params.args: [[], [0.05], [0.04]], params.tasks: [20, 400, 400]}}
        limits: {{run_timeout: 4s}}
    """,
    )
    workdir = tmp_path / "hosts"
    inv = inventory(tmp_path, workdir, vhost)
    db = tmp_path / "results" / "cmx.duckdb"
    before_redis, before_rabbit = redis_state(), rabbit_state(vhost)

    proc = sweep_until(exp, inv, db, workdir, 3, signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, out[-3000:] + err[-3000:]
    statuses = query(db, 'SELECT "params.task", status FROM runs ORDER BY started_at')
    assert statuses == [
        ("usertasks.boom", "failed"),
        ("usertasks.slow", "timeout"),
        ("usertasks.slow", "interrupted"),
    ], statuses
    run_ids = [r for (r,) in query(db, "SELECT run_id FROM runs")]
    # Each run did put things there: result keys with the run's prefix, queued messages.
    assert query(db, "SELECT count(*) FROM tasks WHERE state = 'FAILURE'")[0][0] > 0

    after_redis, after_rabbit = redis_state(), rabbit_state(vhost)
    assert after_redis == before_redis, {db_: sorted(after_redis[db_] - before_redis[db_])[:20] for db_ in after_redis}
    assert after_rabbit == before_rabbit, (after_rabbit, before_rabbit)
    assert all(len(r) > 10 for r in run_ids)


KILLED_MID_PING = """
import sys
from celery import Celery
from cmx.workloads.app.factory import own_replies
app = Celery(broker=sys.argv[1])
own_replies(app, sys.argv[2])
print("pinging", flush=True)
app.control.ping(timeout=30)
"""


def test_a_process_killed_mid_ping_leaves_a_reply_binding_its_run_removes():
    """A run's process killed while it waits for control replies (the driver's pings, a worker's
    mingle) leaves, on Redis (kombu 5.7), its member of the shared reply table and that table's
    deadline. Named with the run's prefix (own_replies) they are the run's, and its end removes
    them. (RabbitMQ deletes an auto-delete reply queue itself once its connection is gone.)"""
    import sys

    from cmx.workloads.servers import registry as servers
    from cmx.workloads.servers.base import RunNames

    url = f"redis://127.0.0.1:6379/{BROKER_DB}"
    run_id = f"ping-{uuid.uuid4().hex[:8]}"
    before = redis_state()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_MID_PING, url, f"cmx.{run_id}"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "pinging"
    time.sleep(1.5)
    proc.kill()
    proc.wait(timeout=10)
    left = redis_state()[BROKER_DB] - before[BROKER_DB]
    members = redis.Redis(db=BROKER_DB).smembers("_kombu.binding.reply.celery.pidbox")
    assert any(f"cmx.{run_id}.".encode() in m for m in members), (left, members)
    servers.get("redis").remove_run("broker", url, RunNames(run_id=run_id, queues=()))
    assert not any(
        f"cmx.{run_id}.".encode() in m for m in redis.Redis(db=BROKER_DB).smembers("_kombu.binding.reply.celery.pidbox")
    )
    assert redis_state() == before


def test_a_killed_controller_leaves_nothing_in_the_broker(tmp_path):
    """kill -9 of `cmx run` mid-drive: the host's agent sees the controller gone, stops the run's
    processes and removes what the run left on the broker and backend (its lease)."""
    write(tmp_path / "usertasks.py", TASKS)
    exp = write(
        tmp_path / "killed.yaml",
        """
        name: leftovers-killed
        workload: {name: tasks, params: {module: usertasks.py, task: usertasks.slow, args: [0.05], tasks: 400}}
        fixed: {broker: redis, backend: redis, pool: threads, concurrency: 1}
    """,
    )
    workdir = tmp_path / "hosts"
    inv = inventory(tmp_path, workdir, None)
    db = tmp_path / "results" / "cmx.duckdb"
    before = redis_state()
    proc = sweep_until(exp, inv, db, workdir, 1, signal.SIGKILL)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 90
    while (now := redis_state()) != before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert now == before, {db_: sorted(now[db_] - before[db_])[:20] for db_ in now}


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_what_no_one_removes_expires_on_its_own(tmp_path, vhost, broker, monkeypatch):
    """The safety net for a run whose every process was killed: its queues, with the messages in
    them, go once unused for ``queue_expires_s``: RabbitMQ deletes them (``x-expires``, through the
    app factory's own declarations); on Redis the driver host's sampler keeps a TTL on the run's
    keys (``--keep-expiring``), and they expire once it is killed too."""
    import sys

    from cmx.workloads.app.factory import create_app
    from cmx.workloads.runtime.spec import RunSpec

    url = f"redis://127.0.0.1:6379/{BROKER_DB}" if broker == "redis" else f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    monkeypatch.setenv("CMX_BROKER_URL", url)
    monkeypatch.setenv("CMX_BACKEND_URL", "")
    spec = RunSpec(
        run_id=f"expiry-{uuid.uuid4().hex[:8]}",
        experiment="e",
        cell_id="c",
        repeat=1,
        workload="throughput",
        broker=broker,
        backend="none",
        queue_expires_s=2.0,
    )
    (tmp_path / "spec.json").write_text(spec.dump())
    sampler = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cmx.workloads.host.sampler",
            "--run-dir",
            str(tmp_path),
            "--host",
            "h1",
            "--keep-expiring",
        ],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    app = create_app(spec, tmp_path, "localhost", client="driver")
    for _ in range(50):
        app.send_task("cmx.throughput.noop", args=("x",), queue=spec.queue)
    app.send_task("cmx.throughput.noop", args=("x",), queue=spec.hold_queue)
    client = redis.Redis(db=BROKER_DB)

    def present() -> set[str]:
        if broker == "redis":
            return {q for q in (spec.queue, spec.hold_queue, f"_kombu.binding.{spec.queue}") if client.exists(q)}
        return {q for q in rabbit_state(vhost)[0] if q.startswith(spec.key_prefix)}

    try:
        assert {spec.queue, spec.hold_queue} <= present()
        app.close()
        if broker == "redis":  # past the expiry, kept while the sampler lives: it sets the TTL anew
            time.sleep(3)
            assert {spec.queue, spec.hold_queue} <= present()
            assert 0 < client.ttl(spec.queue) <= 2 and 0 < client.ttl(f"_kombu.binding.{spec.queue}") <= 2
        sampler.kill()  # every process of the run is gone now
        sampler.wait(10)
        deadline = time.monotonic() + 30  # RabbitMQ checks expiry on its own schedule: generous
        while present() and time.monotonic() < deadline:
            time.sleep(0.25)
        assert present() == set()
    finally:  # the binding tables kombu keeps for an hour, and the queues should the test fail
        from cmx.workloads.host.leftovers import remove_run

        sampler.kill()
        remove_run(spec)


def test_the_redis_remover_takes_the_runs_keys_and_members_and_nothing_of_another_run():
    """What kombu and Celery keep for a run on Redis, beside the same for another run under way:
    after the run's end only the other run's is left, shared tables and ``unacked`` included."""
    import json as _json

    from cmx.workloads.host.leftovers import remove_run
    from cmx.workloads.runtime.spec import RunSpec

    client = redis.Redis(db=BROKER_DB)
    sep = "\x06\x16"

    def spec(run_id: str) -> RunSpec:
        return RunSpec(
            run_id=run_id,
            experiment="e",
            cell_id="c",
            repeat=1,
            workload="throughput",
            broker="redis",
            backend="redis",
            worker_nodes=[f"cmx-{run_id}@h1"],
        )

    def put(run_id: str) -> None:
        q = f"cmx.{run_id}"
        client.lpush(q, "m"), client.lpush(f"{q}{sep}3", "m"), client.lpush(f"{q}.hold", "m")
        client.lpush(f"{q}.raw", "m"), client.lpush(f"cmx-{run_id}@h1.celery.pidbox", "m")
        client.sadd(f"_kombu.binding.{q}", f"{q}{sep}{sep}{q}")
        client.sadd(f"_kombu.binding_permanent.{q}", f"{q}{sep}{sep}{q}")
        client.sadd("_kombu.binding.celery.pidbox", f"{sep}{sep}cmx-{run_id}@h1.celery.pidbox")
        client.zadd("_kombu.binding_deadlines", {q: 1})
        client.hset("unacked", f"tag-{run_id}", _json.dumps([{"body": "x"}, q, q]))
        client.zadd("unacked_index", {f"tag-{run_id}": 1})
        redis.Redis(db=BACKEND_DB).set(f"{q}.celery-task-meta-1", "r")

    mine, other = "aaaa-1-11111111", "aaaa-1-111111112"  # the other's id starts with mine
    before = redis_state()
    put(other)
    kept = redis_state()
    put(mine)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CMX_BROKER_URL", f"redis://127.0.0.1:6379/{BROKER_DB}")
        mp.setenv("CMX_BACKEND_URL", f"redis://127.0.0.1:6379/{BACKEND_DB}")
        got = remove_run(spec(mine))
        try:
            assert redis_state() == kept, sorted(redis_state()[BROKER_DB] - kept[BROKER_DB])
            assert client.smembers("_kombu.binding.celery.pidbox") == {
                f"{sep}{sep}cmx-{other}@h1.celery.pidbox".encode()
            }
            assert client.hkeys("unacked") == [f"tag-{other}".encode()]
            assert got["broker"] > 0 and got["backend"] == 1
        finally:
            remove_run(spec(other))
    assert redis_state() == before


def test_a_database_backend_keeps_no_result_of_the_runs(tmp_path):
    """PostgreSQL's result rows carry no run id: each host removes those of the tasks it ran, for
    a failed run and an ok one alike."""
    import psycopg2

    write(tmp_path / "usertasks.py", TASKS)
    exp = write(
        tmp_path / "pg.yaml",
        """
        name: leftovers-postgres
        workload: {name: tasks, params: {module: usertasks.py, tasks: 20}}
        fixed: {broker: redis, backend: postgres, pool: threads}
        zip:
          - {params.task: [usertasks.boom, usertasks.slow], params.args: [[], [0.001]]}
    """,
    )
    workdir = tmp_path / "hosts"
    inv = inventory(tmp_path, workdir, None, backend="postgresql://postgres@127.0.0.1:5432/postgres")
    db = tmp_path / "results" / "cmx.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [*CMX, "run", str(exp), "--inventory", str(inv), "--db", str(db)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # the boom run failed
    assert sorted(query(db, 'SELECT "params.task", status FROM runs')) == [
        ("usertasks.boom", "failed"),
        ("usertasks.slow", "ok"),
    ]
    ids = [t for (t,) in query(db, "SELECT DISTINCT task_id FROM tasks")]
    assert len(ids) == 40
    with psycopg2.connect("postgresql://postgres@127.0.0.1:5432/postgres") as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM celery_taskmeta WHERE task_id = ANY(%s)", (ids,))
        assert cur.fetchone()[0] == 0

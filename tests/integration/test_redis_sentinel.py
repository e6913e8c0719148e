"""Broker ``redis-sentinel``: a sweep provisions a Sentinel set (master, replica, three sentinels)
on free ports under the host's work dir, its workers and driver reach the master through the
sentinels, and the sweep's end stops the set and leaves no file holding its password. The
machine's own Redis (6379) is never touched."""

from __future__ import annotations

import json
import random
import socket
import time
from pathlib import Path

import pytest
import redis

from tests.conftest import cmx, local_inventory, query, write

pytestmark = pytest.mark.integration

TASKS = 200


def free_ports(n: int) -> int:
    """The first of ``n`` consecutive free loopback ports, below the kernel's ephemeral range (a
    port picked there can be taken by any outgoing connection before the server binds it)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        base = random.randrange(max(1024, low - 12000), low - n)
        if all(_free(base + i) for i in range(n)):
            return base
    raise RuntimeError(f"no {n} consecutive free ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def sentinel_inventory(path: Path, workdir: Path, redis_port: int, sentinel_port: int) -> Path:
    return local_inventory(
        path, workdir, brokers={"redis_sentinel_port": sentinel_port, "redis_sentinel_redis_port": redis_port}
    )


def test_a_sweep_on_a_sentinel_set_it_provisioned_runs_through_the_master_and_leaves_nothing(tmp_path):
    redis_port, sentinel_port = free_ports(2), free_ports(3)
    workdir = tmp_path / "hostwork"
    inv = sentinel_inventory(tmp_path / "inv.yml", workdir, redis_port, sentinel_port)
    exp = write(
        tmp_path / "exp.yaml",
        f"""
        name: sentinel-sweep
        workload: {{name: throughput, params: {{tasks: {TASKS}, mode: backlog}}}}
        fixed: {{broker: redis-sentinel, backend: none, concurrency: 2}}
        matrix: {{pool: [threads, gevent]}}
        limits: {{run_timeout: 2m}}
    """,
    )
    shared = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=5)
    before = shared.info("server")["run_id"]
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    runs = dict(query(db, "SELECT run_id, status FROM runs"))
    assert len(runs) == 2 and set(runs.values()) == {"ok"}, runs
    done = dict(query(db, "SELECT run_id, count(*) FROM tasks WHERE state = 'SUCCESS' GROUP BY run_id"))
    assert done == {r: TASKS for r in runs}, done
    # What each worker said it consumed from: kombu's Sentinel transport, asking for master cmx.
    config = {
        (r, k): json.loads(v)
        for r, k, v in query(
            db, "SELECT run_id, key, value FROM worker_config WHERE key IN ('broker_scheme', 'broker_master_name')"
        )
    }
    assert config == {
        **{(r, "broker_scheme"): "sentinel" for r in runs},
        **{(r, "broker_master_name"): "cmx" for r in runs},
    }, config
    # The run's workers were counted among the clients of the master the sentinels named.
    counted = dict(
        query(
            db,
            "SELECT run_id, max(count) FROM connections WHERE kind = 'redis_sentinel' "
            "AND role = 'broker' AND client = 'worker' GROUP BY run_id",
        )
    )
    assert counted.keys() == runs.keys() and min(counted.values()) >= 1, counted

    # The set ran where its layout says (one host: 2 servers, 3 sentinels), under the work dir...
    setdir = workdir / "redis_sentinel"
    assert sorted(p.name for p in setdir.glob("*.log")) == sorted(
        [f"redis-{redis_port}.log", f"redis-{redis_port + 1}.log"]
        + [f"sentinel-{sentinel_port + i}.log" for i in range(3)]
    )
    replica_log = (setdir / f"redis-{redis_port + 1}.log").read_text()
    assert "MASTER <-> REPLICA sync: Finished with success" in replica_log
    # ...and is gone, with every file that held its password; the shared Redis is as it was.
    deadline = time.monotonic() + 10
    while any(_answers(p) for p in (redis_port, redis_port + 1, *range(sentinel_port, sentinel_port + 3))):
        assert time.monotonic() < deadline, "a server of the set outlived the sweep"
        time.sleep(0.2)
    assert list(setdir.glob("*.conf")) == [] and list(setdir.glob("*.pid")) == []
    password = json.loads((db.parent / ".secrets.json").read_text())["redis_sentinel_password"].encode()
    assert [p for p in workdir.rglob("*") if p.is_file() and password in p.read_bytes()] == []
    assert shared.info("server")["run_id"] == before


def test_failover_broker_moves_the_master_and_the_workers_consume_again(tmp_path):
    """``fault: failover_broker@T`` on a set the sweep provisioned: SENTINEL FAILOVER struck (the
    faults table says when, on the driver's host), the run is ok and every task published ran
    after all: the workers followed the new master (recovery_s measured), or the loss is stored."""
    redis_port, sentinel_port = free_ports(2), free_ports(3)
    inv = sentinel_inventory(tmp_path / "inv.yml", tmp_path / "hostwork", redis_port, sentinel_port)
    exp = write(
        tmp_path / "exp.yaml",
        """
        name: sentinel-failover
        workload: {name: concurrent_sleep, params: {tasks: 60, sleep_s: 0.2}}
        fixed: {broker: redis-sentinel, backend: none, pool: threads, concurrency: 2, prefetch_multiplier: 1,
                fault: failover_broker@1.5s}
        limits: {run_timeout: 2m, settle: 5s}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ((run_id, status, error),) = query(db, "SELECT run_id, status, error FROM runs")
    assert status == "ok", error
    ((kind, struck, ended, why),) = query(
        db, "SELECT kind, struck_at, ended_at, error FROM fault_times WHERE run_id = ?", [run_id]
    )
    assert kind == "failover_broker" and why is None and ended >= struck, (kind, why)
    m = dict(query(db, "SELECT name, value FROM metrics WHERE run_id = ?", [run_id]))
    assert 1.4 <= m["fault_at_s"] < 5, m
    # What happened, as stored: the tasks that ran and those lost add up to those published, and
    # tasks ran after the failover (the workers consume from the new master).
    assert m["tasks_completed"] + m["tasks_lost"] == m["tasks_published"] == 60, m
    assert m["recovery_s"] is not None and m["recovery_s"] < 30, m
    # The fault lasts until the old master is a replica (the sentinels wait ~8 s for that), the
    # workers consuming from it until then; the new master then hands them again what was queued at
    # its promotion: run twice, no task lost (as over SSH: tests/faults/test_ssh_broker_faults.py).
    assert ended - struck >= 4.0 and m["tasks_duplicated"] >= 1 and m["tasks_lost"] == 0, (ended - struck, m)

"""A Sentinel failover under real Celery workers (threads, prefork, gevent): the set cmx
provisions (roles/redis_sentinel, through the engine's own services play), a worker of each pool
consuming through kombu's Sentinel transport, ``workloads.sentinel.failover`` (what the
``failover_broker`` fault runs) and, the hard way, ``kill_master``; the measured time until each
worker consumes again, or never within the bound."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cmx.engine.hosts.ansible import run_playbook
from cmx.engine.hosts.inventory import load_inventory
from cmx.engine.hosts.provision import _service_vars, stop_services
from cmx.workloads.servers import redis_sentinel as sentinel
from tests.conftest import write
from tests.integration.test_redis_sentinel import free_ports, sentinel_inventory

pytestmark = [pytest.mark.integration, pytest.mark.faults]

#: How long the worker may take to consume again after the failover before we call it "never".
FOLLOW_BOUND_S = 60.0
POOLS = ("threads", "prefork", "gevent")

APP = '''
import os, time
from celery import Celery
from cmx.workloads.servers.redis_sentinel import celery_broker

url, options = celery_broker(os.environ["SET_URL"])
app = Celery("follow", broker=url)
app.conf.broker_transport_options = options
app.conf.broker_connection_retry_on_startup = True
app.conf.task_default_queue = "follow"

@app.task(name="mark")
def mark(n):
    with open(os.environ["DONE_FILE"], "a") as f:
        f.write(f"{n} {time.time()}\\n")
'''


def _done(path: Path) -> dict[int, float]:
    if not path.exists():
        return {}
    return {int(n): float(t) for n, t in (line.split() for line in path.read_text().splitlines() if line.strip())}


def _publish(app, n: int, queue: str) -> None:
    """One task, retrying while the set fails over (the producer follows the sentinels too)."""
    app.send_task(
        "mark",
        args=(n,),
        queue=queue,
        retry=True,
        retry_policy={"max_retries": 20, "interval_start": 0.2, "interval_step": 0.2, "interval_max": 1},
    )


def _stop(worker: subprocess.Popen) -> None:
    worker.terminate()
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(10)


def _follow(
    app,
    fo: sentinel.Failover,
    done: dict[str, Path],
    first: int,
    how: str,
    workers: dict[str, subprocess.Popen],
    tmp_path: Path,
) -> None:
    """Publish one task per pool every 0.2 s from the failover on (ids from ``first``) until each
    worker ran one or the bound passed; print how long each took; every one published is consumed."""
    n, follow_s, sent = first, {}, {pool: set() for pool in POOLS}
    end = time.monotonic() + FOLLOW_BOUND_S
    while time.monotonic() < end and len(follow_s) < len(POOLS):
        for pool in POOLS:
            if pool not in follow_s:
                _publish(app, n, f"follow-{pool}")
                sent[pool].add(n)
                after = [t for k, t in _done(done[pool]).items() if k >= first]
                if after:
                    follow_s[pool] = min(after) - fo.asked_at
        n += 1
        time.sleep(0.2)
    demoted = "" if fo.demoted_s is None else f", the old master no longer one after {fo.demoted_s:.2f} s"
    print(
        f"{how}: {fo.old} -> {fo.new} took {fo.took_s:.2f} s{demoted}; consumed again after: "
        + ", ".join(
            f"{pool} {f'{follow_s[pool]:.2f} s' if pool in follow_s else 'never (%g s)' % FOLLOW_BOUND_S}"
            for pool in POOLS
        )
    )
    logs = {pool: (tmp_path / f"worker-{pool}.log").read_text()[-2000:] for pool in POOLS}
    assert all(w.poll() is None for w in workers.values()), logs
    assert set(follow_s) == set(POOLS), {p: logs[p] for p in POOLS if p not in follow_s}
    # Every task published after the failover is consumed: none was left on the old master.
    deadline = time.monotonic() + 30
    for pool in POOLS:
        while missing := sent[pool] - set(_done(done[pool])):
            assert time.monotonic() < deadline, (pool, sorted(missing))
            time.sleep(0.2)


def _is_replica(url: str, address: tuple[str, int]) -> bool:
    import redis

    _, password, _ = sentinel.sentinels(url)
    try:
        return (
            redis.Redis(host=address[0], port=address[1], password=password, socket_timeout=2).info("replication")[
                "role"
            ]
            == "slave"
        )
    except redis.RedisError:
        return False


def test_celery_workers_of_every_pool_follow_a_sentinel_failover(tmp_path):
    redis_port, sentinel_port = free_ports(2), free_ports(3)
    workdir = tmp_path / "hostwork"
    inv_path = sentinel_inventory(tmp_path / "inv.yml", workdir, redis_port, sentinel_port)
    inventory = load_inventory(inv_path, secrets_dir=tmp_path / "results")
    services = inventory.services_to_provision({"redis-sentinel"}, set())
    secrets = {"CMX_REDIS_SENTINEL_PASSWORD": inventory.password("redis_sentinel")}
    started = run_playbook(
        "services.yml", inv_path, tmp_path / "ansible", extravars=_service_vars(services, inventory), secrets=secrets
    )
    workers: dict[str, subprocess.Popen] = {}
    try:
        assert started.ok, started.summary()
        url = inventory.broker_url("redis-sentinel")
        write(tmp_path / "followapp.py", APP)
        done = {pool: tmp_path / f"done-{pool}.txt" for pool in POOLS}
        for pool in POOLS:  # one worker per pool, each on a queue of its own
            env = {
                **os.environ,
                "SET_URL": url,
                "DONE_FILE": str(done[pool]),
                "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
            }
            workers[pool] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "followapp",
                    "worker",
                    "--pool",
                    pool,
                    "-c",
                    "2",
                    "-Q",
                    f"follow-{pool}",
                    "-n",
                    f"{pool}@%h",
                    "--without-gossip",
                    "--without-mingle",
                    "-l",
                    "INFO",
                ],
                cwd=tmp_path,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=open(tmp_path / f"worker-{pool}.log", "w"),
                stderr=subprocess.STDOUT,
            )
        os.environ["SET_URL"], os.environ["DONE_FILE"] = url, str(tmp_path / "unused")  # the producer's app
        sys.path.insert(0, str(tmp_path))
        try:
            import followapp
        finally:
            sys.path.remove(str(tmp_path))
        for pool in POOLS:
            for n in range(10):
                _publish(followapp.app, n, f"follow-{pool}")
        deadline = time.monotonic() + 90
        while any(len(_done(done[pool])) < 10 for pool in POOLS):
            assert time.monotonic() < deadline, {pool: len(_done(done[pool])) for pool in POOLS}
            time.sleep(0.2)

        before = sentinel.master_address(url)
        fo = sentinel.failover(url, timeout_s=30)
        assert fo.old == before and fo.new != fo.old and fo.new[1] in (redis_port, redis_port + 1)
        _follow(followapp.app, fo, done, 100, "SENTINEL FAILOVER", workers, tmp_path)
        # Provisioning again (the next sweep) changes nothing and leaves the failed-over set as it is:
        # the sentinels' rewritten configs are theirs, the role compares its seeds.
        again = run_playbook(
            "services.yml",
            inv_path,
            tmp_path / "ansible",
            secrets=secrets,
            extravars=_service_vars(services, inventory),
        )
        assert again.ok and again.changed == (), again.changed
        assert sentinel.master_address(url) == fo.new

        # The hard way: the master killed; the sentinels must agree it is down (down-after 3 s).
        killed = sentinel.kill_master(url, str(workdir / "redis_sentinel"), timeout_s=60)
        assert killed.old == fo.new and killed.new == fo.old
        _follow(followapp.app, killed, done, 10_000, "SIGKILL of the master", workers, tmp_path)
        deadline = time.monotonic() + 30  # the killed server is back, a replica of the new master
        while not _is_replica(url, killed.old):
            assert time.monotonic() < deadline, "the killed master did not rejoin as a replica"
            time.sleep(0.2)
    finally:
        for worker in workers.values():
            _stop(worker)
        sys.modules.pop("followapp", None)
        os.environ.pop("SET_URL", None)
        os.environ.pop("DONE_FILE", None)
        warning = stop_services(inventory, services, tmp_path)
        assert warning is None, warning

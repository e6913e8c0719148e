"""A Sentinel failover under a real Celery worker: the set cmx provisions (roles/redis_sentinel,
through the engine's own services play), a worker consuming through kombu's Sentinel transport,
``workloads.sentinel.failover`` (what the ``failover_broker`` fault runs), and the measured time
until the worker consumes again, or never within the bound."""
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
from cmx.workloads import sentinel
from tests.conftest import write
from tests.integration.test_redis_sentinel import free_ports, sentinel_inventory

pytestmark = [pytest.mark.integration, pytest.mark.faults]

#: How long the worker may take to consume again after the failover before we call it "never".
FOLLOW_BOUND_S = 60.0

APP = '''
import os, time
from celery import Celery
from cmx.workloads.sentinel import celery_broker

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


def _publish(app, n: int) -> None:
    """One task, retrying while the set fails over (the producer follows the sentinels too)."""
    app.send_task("mark", args=(n,), retry=True, retry_policy={"max_retries": 20, "interval_start": 0.2,
                                                                 "interval_step": 0.2, "interval_max": 1})


def test_a_celery_worker_follows_a_sentinel_failover(tmp_path):
    redis_port, sentinel_port = free_ports(2), free_ports(3)
    workdir = tmp_path / "hostwork"
    inv_path = sentinel_inventory(tmp_path / "inv.yml", workdir, redis_port, sentinel_port)
    inventory = load_inventory(inv_path, secrets_dir=tmp_path / "results")
    services = inventory.services_to_provision({"redis-sentinel"}, set())
    secrets = {"CMX_REDIS_SENTINEL_PASSWORD": inventory.password("redis_sentinel")}
    started = run_playbook("services.yml", inv_path, tmp_path / "ansible", extravars=_service_vars(services, inventory),
                           secrets=secrets)
    worker = None
    try:
        assert started.ok, started.summary()
        url = inventory.broker_url("redis-sentinel")
        write(tmp_path / "followapp.py", APP)
        done_file = tmp_path / "done.txt"
        env = {**os.environ, "SET_URL": url, "DONE_FILE": str(done_file),
               "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
        worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "followapp", "worker", "--pool", "threads",
                                   "-c", "2", "--without-gossip", "--without-mingle", "-l", "INFO"],
                                  cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                                  stdout=open(tmp_path / "worker.log", "w"), stderr=subprocess.STDOUT)
        os.environ["SET_URL"], os.environ["DONE_FILE"] = url, str(done_file)  # the producer's app reads them
        sys.path.insert(0, str(tmp_path))
        try:
            import followapp
        finally:
            sys.path.remove(str(tmp_path))
        for n in range(20):
            _publish(followapp.app, n)
        deadline = time.monotonic() + 60
        while len(_done(done_file)) < 20:
            assert time.monotonic() < deadline, "the worker never consumed before the failover"
            time.sleep(0.2)

        before = sentinel.master_address(url)
        fo = sentinel.failover(url, timeout_s=30)
        assert fo.old == before and fo.new != fo.old and fo.new[1] in (redis_port, redis_port + 1)

        # Publish one task every 0.2 s from the failover on; the worker follows when they are done.
        n, recovered_at = 100, None
        end = time.monotonic() + FOLLOW_BOUND_S
        while time.monotonic() < end and recovered_at is None:
            _publish(followapp.app, n)
            n += 1
            after = [t for k, t in _done(done_file).items() if k >= 100]
            recovered_at = min(after) if after else None
            time.sleep(0.2)
        follow_s = None if recovered_at is None else recovered_at - fo.asked_at
        print(f"failover {fo.old} -> {fo.new} took {fo.took_s:.2f} s; worker consumed again "
              f"{'never (within %g s)' % FOLLOW_BOUND_S if follow_s is None else f'after {follow_s:.2f} s'}")
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
        assert follow_s is not None, ("the worker never consumed again after the failover:\n"
                                      + (tmp_path / "worker.log").read_text()[-3000:])
        # Every task published after the failover is consumed: none was left on the demoted master.
        last = n
        deadline = time.monotonic() + 30
        while not set(range(100, last)) <= set(_done(done_file)):
            assert time.monotonic() < deadline, sorted(set(range(100, last)) - set(_done(done_file)))
            time.sleep(0.2)
        # Provisioning again (the next sweep) changes nothing and leaves the failed-over set as it is:
        # the sentinels' rewritten configs are theirs, the role compares its seeds.
        again = run_playbook("services.yml", inv_path, tmp_path / "ansible", secrets=secrets,
                             extravars=_service_vars(services, inventory))
        assert again.ok and again.changed == (), again.changed
        assert sentinel.master_address(url) == fo.new
    finally:
        if worker is not None:
            worker.terminate()
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(10)
        sys.modules.pop("followapp", None)
        os.environ.pop("SET_URL", None)
        os.environ.pop("DONE_FILE", None)
        warning = stop_services(inventory, services, tmp_path)
        assert warning is None, warning

"""restart_broker, term_worker and failover_broker over real SSH, on network-namespace hosts
(tests/nethosts.py), as test_fault_cleanup.py does for kill_child, kill_worker and
partition_worker: one sweep of three fault cells, read back from what cmx stored.

h1 and h3 are broker hosts (h1: the Redis the sweep provisions, roles/redis; h1 and h3: the Redis
Sentinel set it provisions, roles/redis_sentinel, master and replica on different hosts), h1 also
drives, h2 is the worker host. Then nothing of the faults may be left on any host: no worker, no
stopped broker, no server of the set; and a controller SIGKILLed mid-fault leaves none either.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import cmx, metrics_by, query, write
from tests.faults.common import run_killed_when
from tests.faults.test_controller_killed import _local_leftovers, _namespace_leftovers, _wait_gone
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("nethosts_can_be_made")]

TASKS = 12
SENTINEL_TASKS = 60
FAULTS = {"redis": "restart_broker@1", "term": "term_worker@1", "sentinel": "failover_broker@1.5"}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("sshfaults")
    with NetHosts(root / "net", 3) as net:
        workdir = root / "hosts"
        inv = net.inventory(
            root / "lab.yml",
            {"brokers": ["h1", "h3"], "drivers": ["h1"], "workers": ["h2"]},
            workdir_root=workdir,
            seeded=True,
        )
        exp = write(
            root / "ssh-broker-faults.yaml",
            f"""
            name: ssh-broker-faults
            workload: {{name: concurrent_sleep, params: {{tasks: {TASKS}, sleep_s: 0.5}}}}
            fixed: {{backend: none, pool: threads, concurrency: 2, prefetch_multiplier: 1}}
            # the failover cell: enough completions before and after it for recovery_s's window
            zip:
              - {{broker: [redis, redis, redis-sentinel],
                 fault: [{FAULTS['redis']}s, {FAULTS['term']}s, {FAULTS['sentinel']}s],
                 params.tasks: [{TASKS}, {TASKS}, {SENTINEL_TASKS}], params.sleep_s: [0.5, 0.5, 0.2]}}
            limits: {{run_timeout: 2m, settle: 5s, fault_restart: 1s}}
        """,
        )
        db = root / "results" / "cmx.duckdb"
        started = time.monotonic()
        proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=1800)
        print(f"ssh broker faults: {time.monotonic() - started:.1f} s for 3 fault runs on 3 hosts")
        took, left = _wait_gone(lambda: _namespace_leftovers(net, services=()) + _local_leftovers(workdir))
        yield net, inv, workdir, db, proc, left


def _run(db: Path, fault: str) -> tuple[str, dict]:
    ((run_id, status, error),) = query(db, "SELECT run_id, status, error FROM runs WHERE fault = ?", [fault])
    assert status == "ok", error
    return run_id, metrics_by(db, "fault")[fault]


def _fault(db: Path, run_id: str) -> tuple:
    ((host, kind, pid, error, struck, ended),) = query(
        db, "SELECT host, kind, pid, error, struck_at, ended_at FROM fault_times WHERE run_id = ?", [run_id]
    )
    assert error is None, error
    return host, kind, pid, struck, ended


def test_the_sweep_is_ok(lab):
    *_, proc, _ = lab
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_restart_broker_restarts_the_provisioned_redis_on_its_host(lab):
    *_, db, _, _ = lab
    run_id, m = _run(db, FAULTS["redis"])
    host, kind, pid, struck, ended = _fault(db, run_id)
    assert (host, kind) == ("h1", "restart_broker") and pid and ended > struck
    assert 1.0 <= m["fault_at_s"] < 3.0, m
    # The worker on h2 lived through it (the run is ok); a Redis without persistence came back
    # empty: the tasks still queued at the restart never ran, each stored LOST, run on no host.
    assert m["tasks_published"] == TASKS and m["tasks_completed"] + m["tasks_lost"] == TASKS, m
    assert m["tasks_lost"] >= 1 and m["tasks_duplicated"] == 0, m
    lost = query(db, "SELECT count(*), count(host) FROM tasks WHERE run_id = ? AND state = 'LOST'", [run_id])
    assert lost == [(m["tasks_lost"], 0)], lost


def test_term_worker_on_the_ssh_worker_host_is_replaced(lab):
    *_, db, _, _ = lab
    run_id, m = _run(db, FAULTS["term"])
    host, kind, pid, struck, ended = _fault(db, run_id)
    assert (host, kind) == ("h2", "term_worker") and ended - struck >= 1.0  # fault_restart waited
    pids = {p for (p,) in query(db, "SELECT DISTINCT pid FROM tasks WHERE run_id = ? AND pid IS NOT NULL", [run_id])}
    assert pid in pids and len(pids) == 2, pids  # the old worker, then its replacement, both on h2
    hosts = {h for (h,) in query(db, "SELECT DISTINCT host FROM tasks WHERE run_id = ? AND host IS NOT NULL", [run_id])}
    assert hosts == {"h2"}, hosts
    # A deploy on Redis loses nothing: the running tasks finish (warm shutdown), the reserved ones
    # go back to the queue (kombu restores what was unacknowledged) and run again, flagged so.
    assert m["tasks_lost"] == 0 and m["tasks_completed"] == TASKS and m["tasks_duplicated"] == 0, m
    assert m["tasks_redelivered"] >= 1 and m["stall_s"] >= 1.0, m
    print(
        f"term_worker over SSH: the fault lasted {ended - struck:.2f} s (warm shutdown, fault_restart, "
        f"replacement ready), stall_s {m['stall_s']:.2f}, redelivered {m['tasks_redelivered']:g}"
    )


def test_failover_broker_moves_the_master_across_hosts_and_the_worker_follows(lab):
    *_, db, _, _ = lab
    run_id, m = _run(db, FAULTS["sentinel"])
    host, kind, _, struck, ended = _fault(db, run_id)
    assert (host, kind) == ("h1", "failover_broker") and ended >= struck  # struck from the driver's host
    assert 1.4 <= m["fault_at_s"] < 5.0, m
    assert m["tasks_completed"] + m["tasks_lost"] == m["tasks_published"] == SENTINEL_TASKS, m
    assert m["recovery_s"] is not None and m["recovery_s"] < 30, m
    # The fault lasts until the sentinels turn the old master into a replica (they wait some 8 s
    # for their configuration to spread): until then the worker goes on consuming from the old
    # master. Then the new master, which has every task queued at its promotion, hands the worker
    # those again: each one run on the old master in between runs twice.
    assert ended - struck >= 4.0, (struck, ended)
    assert m["tasks_duplicated"] >= 1 and m["tasks_lost"] == 0, m
    print(
        f"failover over SSH: the fault lasted {ended - struck:.2f} s (promotion, then the old master's "
        f"demotion), recovery_s {m['recovery_s']:.2f}, stall_s {m['stall_s']:.2f}, "
        f"lost {m['tasks_lost']:g}, duplicated {m['tasks_duplicated']:g}"
    )


def test_nothing_of_the_faults_is_left_on_any_host(lab):
    *_, left = lab
    assert left == [], left


def _fault_event(run_dirs: Path, kind: str) -> bool:
    """A fault of ``kind`` announced (the agent records it before the blow) in a run dir under ``run_dirs``."""
    return any(
        f'"fault": "{kind}@' in p.read_text(errors="replace") for p in run_dirs.glob("runs/*/worker_events.json")
    )


#: The broker servers a sweep provisions (process names): they outlive a killed controller (the next
#: sweep's provision finds them running), unlike every process of a run.
SERVICES = ("redis-server", "beam.smp", "epmd", "erl_child_setup", "inet_gethost", "sh")


def _run_leftovers(net: NetHosts, workdir: Path) -> list[str]:
    return _namespace_leftovers(net, services=SERVICES) + _local_leftovers(workdir)


def test_a_controller_killed_mid_term_worker_leaves_no_replacement_on_the_ssh_host(lab, tmp_path):
    net, inv, workdir, *_ = lab
    exp = write(
        tmp_path / "term-killed.yaml",
        """
        name: ssh-term-killed
        workload: {name: concurrent_sleep, params: {tasks: 20, sleep_s: 0.5}}
        fixed: {broker: redis, backend: none, pool: prefork, concurrency: 2, fault: term_worker@0.5s}
        limits: {run_timeout: 2m, settle: 3s, fault_restart: 4s}
    """,
    )
    run_killed_when(
        exp, inv, tmp_path / "k.duckdb", lambda: any(workdir.glob("h2/runs/*/worker.exit")), bound=1200
    )  # provisioning first (a loaded machine: minutes)
    took, left = _wait_gone(lambda: _run_leftovers(net, workdir))
    assert left == [], f"still running 60 s after the controller was killed mid-fault: {left}"
    time.sleep(5)  # past the moment the replacement would have started
    assert _run_leftovers(net, workdir) == []


def test_a_controller_killed_mid_restart_broker_leaves_the_broker_running(lab, tmp_path):
    """RabbitMQ (its restart takes seconds): the controller dies while the node is stopped or
    booting; the agent on the broker host lets the restart finish before it stops, so the node
    the sweep provisioned answers again, a new process, and nothing of the run is left."""
    import socket

    net, inv, workdir, *_ = lab
    h1 = net.hosts[0]
    exp = write(
        tmp_path / "restart-killed.yaml",
        """
        name: ssh-restart-killed
        workload: {name: concurrent_sleep, params: {tasks: 20, sleep_s: 0.5}}
        fixed: {broker: rabbitmq, backend: none, pool: threads, concurrency: 2, fault: restart_broker@0.5s}
        limits: {run_timeout: 2m, settle: 3s}
    """,
    )
    pidfile = Path(f"/var/lib/cmx-rabbitmq/test{net.tag}-h1/rabbitmq.pid")
    seen: list[int] = []

    def struck() -> bool:  # the node's pid until the fault is announced: the one it restarts
        if _fault_event(workdir / "h1", "restart_broker"):
            return True
        try:
            seen.append(int(pidfile.read_text()))
        except (OSError, ValueError):
            pass
        return False

    run_killed_when(exp, inv, tmp_path / "k.duckdb", struck, bound=1200)
    before = seen[-1]
    took, left = _wait_gone(lambda: _run_leftovers(net, workdir))
    assert left == [], f"still running 60 s after the controller was killed mid-fault: {left}"
    deadline = time.monotonic() + 60
    while True:  # the agent is gone by now: what it left is what stays
        try:
            socket.create_connection((h1.address, 5672), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the broker restarted by the fault was left stopped"
            time.sleep(0.5)
    after = int(pidfile.read_text())
    assert after != before and after in net.pids(h1), (before, after)

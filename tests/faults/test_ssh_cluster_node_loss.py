"""Broker ``rabbitmq-cluster`` over real SSH, one node per brokers host (issue 42): a sweep
provisions the three-node cluster on three network-namespace hosts (tests/nethosts.py; each host
its own Erlang VM, epmd and ports, the nodes joined by long names over the bridge), runs a classic
and a quorum queue on it with real workers, SIGKILLs the first node mid-run
(``kill_broker_node``, struck by that host's agent) and starts it again. The quorum queue loses
nothing; the classic queue's home was the killed node. Then nothing of the cluster is left on any
host: no beam, no epmd, no listener, no node's files.

h1, h2, h3 run one node each (h1 the first, the one every client reaches first); h2 also runs the
workers, h3 the driver.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from cmx.workloads.servers import rabbitmq_cluster as cluster
from cmx.workloads.servers.rabbitmq_cluster import GroupHost
from tests.conftest import cmx, query, write
from tests.faults.test_controller_killed import _local_leftovers, _namespace_leftovers, _wait_gone
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("nethosts_can_be_made")]

TASKS = 60


def _answers(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((address, port)) == 0


def _base(net: NetHosts, host: str) -> str:
    """The host's cluster folder: under the dir NetHosts removes at its end, whatever happens."""
    return f"/var/lib/cmx-rabbitmq/test{net.tag}-{host}/cluster"


def _nodes(net: NetHosts) -> list[cluster.Node]:
    return cluster.layout(
        [GroupHost(h.name, h.address, {"rabbitmq_cluster_base_dir": _base(net, h.name)}) for h in net.hosts]
    )


def test_a_cluster_over_three_ssh_hosts_loses_a_node_and_quorum_loses_nothing(tmp_path):
    with NetHosts(tmp_path / "net", 3) as net:
        workdir = tmp_path / "hosts"
        inv = net.inventory(
            tmp_path / "lab.yml",
            {"brokers": ["h1", "h2", "h3"], "workers": ["h2"], "drivers": ["h3"]},
            workdir_root=workdir,
            seeded=True,
            hostvars={h.name: {"rabbitmq_cluster_base_dir": _base(net, h.name)} for h in net.hosts},
        )
        nodes = _nodes(net)
        assert [(n.host, n.port, n.longname) for n in nodes] == [(h, 5681, True) for h in ("h1", "h2", "h3")]
        exp = write(
            tmp_path / "exp.yaml",
            f"""
            name: ssh-cluster-node-loss
            workload: {{name: concurrent_sleep, params: {{tasks: {TASKS}, sleep_s: 0.2}}}}
            fixed: {{broker: rabbitmq-cluster, backend: none, pool: threads, concurrency: 2,
                    prefetch_multiplier: 1, celery.task_acks_late: true, fault: kill_broker_node@1.5s}}
            matrix: {{queue_type: [classic, quorum]}}
            limits: {{run_timeout: 3m, settle: 5s, fault_restart: 1s}}
        """,
        )
        db = tmp_path / "results" / "cmx.duckdb"
        started = time.monotonic()
        proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=1200)
        print(f"ssh cluster node loss: {time.monotonic() - started:.1f} s for 2 runs on a 3-host cluster")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

        runs = dict(query(db, "SELECT queue_type, run_id FROM runs WHERE status = 'ok'"))
        assert sorted(runs) == ["classic", "quorum"], runs
        # The fault struck on h1, the first node's host, by its agent, and ended once the node was back.
        struck = {
            r: (h, k, p, e, end > at)
            for r, h, k, p, e, at, end in query(
                db, "SELECT run_id, host, kind, pid, error, struck_at, ended_at FROM fault_times"
            )
        }
        assert struck == {r: ("h1", "kill_broker_node", struck[r][2], None, True) for r in runs.values()}, struck
        assert all(p for _, _, p, _, _ in struck.values()), struck
        metrics = {
            (q, n): v
            for q, n, v in query(db, "SELECT r.queue_type, m.name, m.value FROM metrics m JOIN runs r USING (run_id)")
        }
        for q in runs:
            assert metrics[q, "tasks_published"] == TASKS
            assert metrics[q, "tasks_completed"] + metrics[q, "tasks_lost"] == TASKS, (q, metrics)
        assert metrics["quorum", "tasks_lost"] == 0 and metrics["quorum", "tasks_completed"] == TASKS, metrics
        # What the broker says: the quorum queue had a member on each host's node, the classic one
        # lived on the node the fault killed (h1's, the first every client reaches).
        home = {t: s for t, s in query(db, "SELECT type, source FROM broker_queues")}
        assert set(home["quorum"].removeprefix("management API: on ").split(", ")) == {n.name for n in nodes}, home
        assert home["classic"] == f"management API: on {nodes[0].name}", home
        hosts = {h for (h,) in query(db, "SELECT DISTINCT host FROM tasks WHERE host IS NOT NULL")}
        assert hosts == {"h2"}, hosts
        print(
            f"quorum over SSH: stall_s {metrics['quorum', 'stall_s']}, recovery_s "
            f"{metrics.get(('quorum', 'recovery_s'))}, duplicated {metrics['quorum', 'tasks_duplicated']:g}; "
            f"classic lost {metrics['classic', 'tasks_lost']:g}"
        )

        # Nothing is left on any host: no process but sshd (beam, epmd, a CLI's VM), no listener, no files.
        took, left = _wait_gone(lambda: _namespace_leftovers(net, services=()) + _local_leftovers(workdir))
        assert left == [], left
        for n in nodes:
            assert not any(_answers(n.address, p) for p in (n.port, n.management_port, n.dist_port, 4369)), n
        assert not any(Path(n.dir).exists() or Path(n.dir).parent.exists() for n in nodes)

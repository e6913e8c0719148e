"""Broker ``rabbitmq-cluster`` and the ``queue_type`` dimension: a sweep provisions a three-node
RabbitMQ cluster on this machine (roles/rabbitmq_cluster: three nodes of their own, on free ports,
beside the machine's own RabbitMQ), runs classic and quorum queues on it with real workers, reads
each run's queue type back from the broker, and leaves no node running when it ends."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from cmx.workloads.servers import rabbitmq_cluster as cluster
from cmx.workloads.servers.rabbitmq_cluster import GroupHost
from tests.conftest import cmx, local_inventory, query, write
from tests.integration.test_redis_sentinel import _answers, free_ports

pytestmark = pytest.mark.integration

TASKS = 200
PAYLOAD = 256 * 1024  # 50 MiB of messages in the backlog: what the broker's memory shows


def epmd_names() -> set[str]:
    """The Erlang nodes epmd knows on this machine (a killed CLI's hidden VM too)."""
    out = subprocess.run(["epmd", "-names"], capture_output=True, text=True, timeout=10).stdout
    return {line.split()[1] for line in out.splitlines() if line.startswith("name ")}


def beam_of(names: set[str]) -> list[str]:
    """Command lines of Erlang VMs running one of ``names`` (node names without the host)."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, timeout=10).stdout
    return [
        line
        for line in out.splitlines()
        if "beam" in line and any(f"-sname {n}@" in line or f"-name {n}@" in line for n in names)
    ]


def cluster_inventory(tmp_path: Path) -> tuple[Path, list[cluster.Node]]:
    """This machine as every host, the cluster's three nodes on free ports; and where they run."""
    amqp, management, dist = free_ports(3), free_ports(3), free_ports(3)
    hostvars = {
        "rabbitmq_cluster_port": amqp,
        "rabbitmq_cluster_management_port": management,
        "rabbitmq_cluster_dist_port": dist,
        "rabbitmq_cluster_base_dir": f"/var/lib/cmx-rabbitmq/t{amqp}",
    }
    inv = local_inventory(tmp_path / "inv.yml", tmp_path / "hostwork", brokers=hostvars)
    return inv, cluster.layout([GroupHost("localhost", "127.0.0.1", hostvars)])


def assert_gone(nodes: list[cluster.Node]) -> None:
    """Nothing of the cluster is left: no node in epmd, no VM, no listener, no files."""
    names = {n.name.split("@")[0] for n in nodes}
    deadline = time.monotonic() + 10
    while names & epmd_names() or beam_of(names) or any(_answers(n.port) for n in nodes):
        assert time.monotonic() < deadline, (epmd_names(), beam_of(names))
        time.sleep(0.2)
    assert not any(Path(n.dir).exists() or Path(n.dir).parent.exists() for n in nodes)


def test_a_sweep_on_a_three_node_cluster_runs_classic_and_quorum_queues_and_leaves_nothing(tmp_path):
    inv, nodes = cluster_inventory(tmp_path)
    exp = write(
        tmp_path / "exp.yaml",
        f"""
        name: cluster-queue-types
        workload: {{name: throughput, params: {{tasks: {TASKS}, mode: backlog, payload_bytes: {PAYLOAD}}}}}
        fixed: {{broker: rabbitmq-cluster, backend: none, pool: threads, concurrency: 2}}
        matrix: {{queue_type: [classic, quorum]}}
        limits: {{run_timeout: 2m}}
    """,
    )
    names = {n.name.split("@")[0] for n in nodes}
    assert len(nodes) == 3 and not names & epmd_names()
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    runs = dict(query(db, "SELECT run_id, queue_type FROM runs WHERE status = 'ok'"))
    assert sorted(runs.values()) == ["classic", "quorum"], runs
    done = dict(query(db, "SELECT run_id, count(*) FROM tasks WHERE state = 'SUCCESS' GROUP BY run_id"))
    assert done == {r: TASKS for r in runs}, done
    # What the broker itself says each run's queue was: a quorum queue has a member on every node
    # of the cluster (so it was one of three), a classic queue lives on one node.
    read = {r: (t, s) for r, t, s in query(db, "SELECT run_id, type, source FROM broker_queues")}
    assert {r: t for r, (t, _) in read.items()} == runs, read
    full = {n.name for n in nodes}
    for run_id, (kind, source) in read.items():
        on = set(source.removeprefix("management API: on ").split(", "))
        assert on == full if kind == "quorum" else (len(on) == 1 and on <= full), source
    # The workers' connections were counted (on whichever node they reached).
    counted = dict(
        query(
            db,
            "SELECT run_id, max(count) FROM connections WHERE kind = 'rabbitmq_cluster' "
            "AND role = 'broker' AND client = 'worker' GROUP BY run_id",
        )
    )
    assert counted.keys() == runs.keys(), counted
    # The broker's memory by its own accounting: every node's mem_used at each probe tick, and the
    # run's figure the sum over the three nodes at the tick it was most.
    per_node = query(db, "SELECT run_id, ts, node, used_bytes FROM server_memory WHERE role = 'broker'")
    assert {n for _, _, n, _ in per_node} == full, per_node[:5]
    sums: dict[tuple[str, float], list[int]] = {}
    for run_id, ts, _, used in per_node:
        sums.setdefault((run_id, ts), []).append(used)
    peaks = dict(query(db, "SELECT run_id, value FROM metrics WHERE name = 'broker_memory_peak_bytes'"))
    growth = dict(query(db, "SELECT run_id, value FROM metrics WHERE name = 'broker_memory_growth_bytes'"))
    for run_id in runs:
        whole = [sum(v) for (r, _), v in sums.items() if r == run_id and len(v) == len(full)]
        assert whole and peaks[run_id] == max(whole), (run_id, peaks, whole)
        assert peaks[run_id] > max(used for r, _, _, used in per_node if r == run_id)  # more than any one node
        # What the run added: never negative, never more than the peak; it may be 0 (a small run's first
        # tick can be its peak: Erlang collects garbage). The sampler probes' tests and test_broker_memory hold
        # a known rise (a filled queue).
        assert growth[run_id] is not None and 0 <= growth[run_id] <= peaks[run_id], growth
    print("broker memory (peak, growth) by queue type:", {runs[r]: (peaks[r], growth[r]) for r in runs})

    assert_gone(nodes)


def test_kill_broker_node_mid_run_quorum_loses_nothing_and_classic_loses_its_home_nodes_tasks(tmp_path):
    """``fault: kill_broker_node@T`` SIGKILLs the cluster's first node (the one every client
    reached first, so the home of a classic queue) under acks-late load: the fault is stored with
    the node's pid and ends once the node is back. A quorum queue elects another leader: nothing
    lost. A classic queue's home is gone: the worker exits when its redeclaration is refused, and
    the tasks it never ran are counted lost; both runs are ok (the loss is the finding)."""
    inv, nodes = cluster_inventory(tmp_path)
    exp = write(
        tmp_path / "exp.yaml",
        """
        name: cluster-node-loss
        workload: {name: concurrent_sleep, params: {tasks: 60, sleep_s: 0.2}}
        fixed: {broker: rabbitmq-cluster, backend: none, pool: threads, concurrency: 2,
                prefetch_multiplier: 1, celery.task_acks_late: true, fault: kill_broker_node@1.5s}
        matrix: {queue_type: [classic, quorum]}
        limits: {run_timeout: 3m, settle: 5s, fault_restart: 1s}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = dict(query(db, "SELECT queue_type, run_id FROM runs WHERE status = 'ok'"))
    assert sorted(runs) == ["classic", "quorum"], runs
    struck = {
        r: (k, p, e, end > at)
        for r, k, p, e, at, end in query(db, "SELECT run_id, kind, pid, error, struck_at, ended_at FROM faults")
    }
    assert all(k == "kill_broker_node" and p and e is None and ended for k, p, e, ended in struck.values()), struck
    assert struck.keys() == set(runs.values())
    metrics = {
        (q, n): v
        for q, n, v in query(db, "SELECT r.queue_type, m.name, m.value FROM metrics m JOIN runs r USING (run_id)")
    }
    for q in runs:
        assert metrics[q, "tasks_published"] == 60
        assert metrics[q, "tasks_completed"] + metrics[q, "tasks_lost"] == 60, (q, metrics)
        assert (q, "tasks_duplicated") in metrics and (q, "stall_s") in metrics
    assert metrics["quorum", "tasks_lost"] == 0, metrics
    home = {t: s for t, s in query(db, "SELECT type, source FROM broker_queues")}
    assert home["classic"] == f"management API: on {nodes[0].name}", home  # the node the fault killed
    assert_gone(nodes)


CROSS_NODE = '''
import os
import time

import amqp

from cmx.workloads.catalog.base import Workload, WorkloadParams


class CrossParams(WorkloadParams):
    rounds: int = 1000


class CrossNode(Workload):
    """Each round: a fresh queue declared on the cluster's first node (every other round with a
    direct exchange and a binding, as Celery declares them), and at once one message published to
    it, mandatory and confirmed, on a connection to the last node; then whether it is in the queue."""
    name = "crossnode"
    Params = CrossParams

    def register_tasks(self, app):
        pass

    def drive(self, ctx, params):
        from urllib.parse import unquote, urlsplit

        def connect(url):
            p = urlsplit(url)
            c = amqp.Connection(f"{p.hostname}:{p.port}", userid=unquote(p.username),
                                password=unquote(p.password), virtual_host="/")
            c.connect()
            return c

        urls = os.environ["CMX_BROKER_URL"].split(";")
        first, last = connect(urls[0]), connect(urls[-1])
        declare, publish = first.channel(), last.channel()
        publish.confirm_select()
        seen = {"returned": 0, "acked": 0}
        publish.events["basic_return"].add(lambda *a: seen.__setitem__("returned", seen["returned"] + 1))
        publish.events["basic_ack"].add(lambda tag, multiple: seen.__setitem__("acked", max(seen["acked"], tag)))
        queued = {"": 0, "direct": 0}
        returned = {"": 0, "direct": 0}
        for i in range(params.rounds):
            q, kind = f"{ctx.spec.queue}.x{i}", ("direct" if i % 2 else "")
            if kind:
                declare.exchange_declare(q, "direct", durable=True, auto_delete=False)
            declare.queue_declare(q, durable=True, auto_delete=False)
            if kind:
                declare.queue_bind(q, q, q)
            before = seen["returned"]
            publish.basic_publish(amqp.Message(b"x"), exchange=q if kind else "", routing_key=q, mandatory=True)
            deadline = time.monotonic() + 10
            while seen["acked"] <= i and time.monotonic() < deadline:
                last.drain_events(timeout=1)
            returned[kind] += seen["returned"] - before
            queued[kind] += declare.queue_declare(q, passive=True).message_count
            declare.queue_delete(q)
            if kind:
                declare.exchange_delete(q)
        for kind, name in (("", "default"), ("direct", "direct")):
            ctx.metric(f"cross_{name}_queued", queued[kind])
            ctx.metric(f"cross_{name}_returned", returned[kind])
        ctx.metric("cross_acked", seen["acked"])
        first.close()
        last.close()
'''


def test_a_message_published_on_another_node_right_after_its_queue_is_declared_is_queued_or_returned(tmp_path):
    """What the fast publisher's ``mandatory`` is for (issue 42): RabbitMQ confirms a message no queue
    took and drops it, and a queue (or a binding) declared on one node of a cluster is not at once
    routable from another (2026-11-28, RabbitMQ 3.10.8, three nodes on this machine: 4 of 1,000).
    Published mandatory, every message is either in its queue or comes back: none is lost unseen.
    The fast publisher is not exposed (it declares its queue on its own channel before it
    publishes); this measures the broker."""
    inv, nodes = cluster_inventory(tmp_path)
    write(tmp_path / "cross.py", CROSS_NODE)
    exp = write(
        tmp_path / "exp.yaml",
        """
        name: cluster-cross-node
        workload: {name: ./cross.py:CrossNode, params: {rounds: 1000}}
        fixed: {broker: rabbitmq-cluster, backend: none, pool: threads, concurrency: 1}
        limits: {run_timeout: 5m}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = dict(query(db, "SELECT name, value FROM metrics WHERE name LIKE 'cross_%'"))
    assert got["cross_acked"] == 1000, got  # every one confirmed, the returned ones too
    for kind in ("default", "direct"):
        assert got[f"cross_{kind}_queued"] + got[f"cross_{kind}_returned"] == 500, got
    print("returned unroutable of 500 each:", {k: got[f"cross_{k}_returned"] for k in ("default", "direct")})
    assert_gone(nodes)

"""A fault run leaves nothing behind, and works over SSH as on this machine.

- The controller (`cmx run`) SIGKILLed while a kill_worker fault waits to start its replacement:
  within a minute no process of the run is left (the agent's lease ends: it cancels the fault, so
  no replacement starts after it stopped what runs).
- Over real SSH to two network-namespace hosts (tests/nethosts.py: the driver and a provisioned
  Redis on h1, the worker on h2): a busy prefork child killed on h2 is found and killed there, its
  task stored as what became of it, and a killed worker's replacement joins.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import cmx, metrics_by, query, write
from tests.faults.common import run_killed_when
from tests.faults.test_controller_killed import _local_inventory, _local_leftovers, _namespace_leftovers, _wait_gone
from tests.nethosts import NetHosts, missing
from tests.prereqs import require

pytestmark = [pytest.mark.integration]


def _struck(workdir: Path) -> bool:
    """A kill_worker fault struck on a host under ``workdir``: the old worker's exit is recorded."""
    return any(workdir.glob("*/runs/*/worker.exit"))


def test_a_killed_controller_mid_fault_leaves_no_replacement_worker(tmp_path):
    workdir = tmp_path / "hosts"
    inv = _local_inventory(tmp_path, workdir)
    exp = write(
        tmp_path / "mid-fault.yaml",
        """
        name: mid-fault
        workload: {name: concurrent_sleep, params: {tasks: 20, sleep_s: 0.5}}
        fixed: {broker: redis, pool: prefork, concurrency: 2, fault: kill_worker@0.5s}
        limits: {run_timeout: 2m, settle: 3s, fault_restart: 4s}
    """,
    )
    # killed inside the 4 s before the replacement starts
    run_killed_when(exp, inv, tmp_path / "r.duckdb", lambda: _struck(workdir), after=1.0)
    took, left = _wait_gone(lambda: _local_leftovers(workdir))
    assert left == [], f"still running 60 s after the controller was killed mid-fault: {left}"
    time.sleep(5)  # past the moment the replacement would have started
    assert _local_leftovers(workdir) == []


def test_faults_over_ssh_on_namespace_hosts(tmp_path):
    require(missing())
    with NetHosts(tmp_path / "net", 2) as net:
        workdir = tmp_path / "hosts"
        inv = net.inventory(
            tmp_path / "lab.yml",
            {"brokers": ["h1"], "drivers": ["h1"], "workers": ["h2"]},
            workdir_root=workdir,
            seeded=True,
        )
        exp = write(
            tmp_path / "ssh-faults.yaml",
            """
            name: ssh-faults
            workload: {name: concurrent_sleep, params: {tasks: 8, sleep_s: 1.0}}
            fixed: {broker: redis, pool: prefork, concurrency: 2, prefetch_multiplier: 1}
            zip:
              - {fault: [kill_child@0.5s, kill_child@0.5s, kill_worker@0.8s],
                 celery.task_acks_late: [false, true, true], celery.task_reject_on_worker_lost: [false, true, true]}
            limits: {run_timeout: 3m, settle: 3s, fault_restart: 1s}
        """,
        )
        db = tmp_path / "results" / "cmx.duckdb"
        done = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        rows = query(
            db,
            'SELECT r.fault, r."celery.task_acks_late", f.host, f.kind, f.error, '
            '(SELECT list(state ORDER BY state) FROM tasks t '
            'WHERE t.run_id = f.run_id AND t.task_id = f.task_id) '
            'FROM fault_times f JOIN runs r USING (run_id) ORDER BY 1, 2',
        )
        got = {(fault, acks): (host, kind, error, states) for fault, acks, host, kind, error, states in rows}
        assert got[("kill_child@0.5", False)] == ("h2", "kill_child", None, ["LOST"])
        assert got[("kill_child@0.5", True)] == ("h2", "kill_child", None, ["SUCCESS"])
        assert got[("kill_worker@0.8", True)][:3] == ("h2", "kill_worker", None)
        m = metrics_by(db, "fault, \"celery.task_acks_late\"")
        for key, cell in m.items():
            assert cell["tasks_completed"] + cell["tasks_lost"] == 8, (key, cell)
        took, left = _wait_gone(lambda: _namespace_leftovers(net) + _local_leftovers(workdir))
        assert left == [], left


def _blackholes(net: NetHosts) -> list[str]:
    """What a partition left on the hosts: a blackhole route or cmx's packet-filter table/chain."""

    def lines(h, *cmd: str) -> list[str]:
        return subprocess.run(["ip", "netns", "exec", h.ns, *cmd], capture_output=True, text=True).stdout.splitlines()

    return [
        f"{h.name}: {line}"
        for h in net.hosts
        for line in lines(h, "ip", "route") + lines(h, "nft", "list", "tables")
        if "blackhole" in line or "cmx_partition" in line
    ]


def test_partition_worker_over_ssh_is_always_undone(tmp_path):
    """partition_worker@T/D on a namespace host (never this machine's routes): the worker host
    cannot reach the broker for D seconds, then can again; the route is gone after the run, and
    after a controller killed mid-partition too (the agent's lease end undoes it)."""
    require(missing())
    with NetHosts(tmp_path / "net", 2) as net:
        workdir = tmp_path / "hosts"
        inv = net.inventory(
            tmp_path / "lab.yml",
            {"brokers": ["h1"], "drivers": ["h1"], "workers": ["h2"]},
            workdir_root=workdir,
            seeded=True,
        )
        body = """
            workload: {{name: concurrent_sleep, params: {{tasks: {tasks}, sleep_s: 0.5}}}}
            fixed: {{broker: redis, pool: threads, concurrency: 2, prefetch_multiplier: 1,
                     fault: "partition_worker@{at}/{d}"}}
            limits: {{run_timeout: 3m, settle: 3s}}
        """
        body = textwrap.dedent(body)
        exp = write(tmp_path / "partition.yaml", "name: partition\n" + body.format(tasks=8, at="0.5s", d="2s"))
        db = tmp_path / "results" / "cmx.duckdb"
        done = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        ((host, kind, error, struck, ended, method),) = query(
            db, "SELECT host, kind, error, struck_at, ended_at, method FROM fault_times"
        )
        assert (host, kind, error) == ("h2", "partition_worker", None) and ended - struck >= 2.0
        assert method == ("nftables" if shutil.which("nft") else "iptables" if shutil.which("iptables") else "route")
        m = metrics_by(db, "fault")["partition_worker@0.5/2"]
        assert m["tasks_completed"] + m["tasks_lost"] == 8, m
        assert _blackholes(net) == []

        # the controller killed while the partition holds: the agent's lease end removes the cut
        long = write(
            tmp_path / "partition-long.yaml", "name: partition-long\n" + body.format(tasks=20, at="0.5s", d="60s")
        )
        run_killed_when(long, inv, tmp_path / "k.duckdb", lambda: _blackholes(net), what="the partition held")
        t0 = time.monotonic()
        while _blackholes(net) and time.monotonic() - t0 < 60:
            time.sleep(0.5)
        assert _blackholes(net) == [], "the partition outlived the killed controller"
        took, left = _wait_gone(lambda: _namespace_leftovers(net) + _local_leftovers(workdir))
        assert left == [], left

"""detect_s is when the worker noticed a partition, known in both directions (issue 39 point 4),
over real SSH on network-namespace hosts (tests/nethosts.py: RabbitMQ provisioned on h1 with the
driver, the worker on h2, partition_worker dropping h2's packets to and from it).

What decides it (experiments/faults/partition-heartbeat.yaml): py-amqp's socket carries
TCP_USER_TIMEOUT 1 s, so the connection breaks 1 s after the worker first sends into the cut.
- A quiet worker (both tasks run through the partition) with heartbeat 0 sends nothing: it never
  notices, detect_s has no value, and nothing is lost.
- The same worker with heartbeat 4 sends a heartbeat every 2 s: it notices within 2 s + 1 s (and
  kombu's own check gives up after two silent intervals, 8 s).
- A busy worker with heartbeat 0 acks a task every 0.25 s: it notices within about a second.
A detect_s read from the wrong log line, the wrong clock or the wrong run fails one of the three.
"""

from __future__ import annotations

import pytest

from tests.conftest import cmx, query, write
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("nethosts_can_be_made")]

STRIKE_S, CUT_S = 3, 12


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = tmp_path_factory.mktemp("heartbeat")
    with NetHosts(root / "net", 2) as net:
        inv = net.inventory(
            root / "lab.yml",
            {"brokers": ["h1"], "drivers": ["h1"], "workers": ["h2"]},
            workdir_root=root / "hosts",
            seeded=True,
        )
        exp = write(
            root / "heartbeat-detect.yaml",
            f"""
            name: heartbeat-detect
            workload: {{name: concurrent_sleep, params: {{tasks: 2, sleep_s: 20.0}}}}
            fixed: {{broker: rabbitmq, backend: none, pool: threads, concurrency: 2, prefetch_multiplier: 1,
                     fault: partition_worker@{STRIKE_S}s/{CUT_S}s}}
            matrix: {{heartbeat: [0, 4]}}
            include:
              - {{heartbeat: 0, params.tasks: 60, params.sleep_s: 0.5}}
            limits: {{run_timeout: 3m, settle: 10s}}
        """,
        )
        db = root / "results" / "cmx.duckdb"
        proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=1200)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        rows = query(
            db,
            """
            SELECT r.heartbeat, r."params.tasks", r.status, max(m.value) FILTER (WHERE m.name = 'detect_s'),
                   max(m.value) FILTER (WHERE m.name = 'tasks_lost'),
                   max(m.value) FILTER (WHERE m.name = 'fault_at_s'),
                   (SELECT method FROM faults f WHERE f.run_id = r.run_id)
            FROM runs r JOIN metrics m USING (run_id) GROUP BY ALL""",
        )
        yield {(hb, "busy" if tasks == 60 else "quiet"): row for hb, tasks, *row in rows}


def test_every_run_is_ok_and_the_cut_dropped_packets(measured):
    assert set(measured) == {(0, "quiet"), (4, "quiet"), (0, "busy")}, measured
    for cell, (status, _detect, _lost, fault_at, method) in measured.items():
        assert status == "ok" and method == "nftables", (cell, status, method)
        assert STRIKE_S <= fault_at < STRIKE_S + 2, (cell, fault_at)


def test_a_quiet_worker_without_heartbeats_never_notices(measured):
    _status, detect, lost, *_ = measured[(0, "quiet")]
    assert detect is None, f"noticed {detect} s after a partition it sent nothing into"
    assert lost == 0


def test_a_quiet_worker_notices_by_its_heartbeat(measured):
    _status, detect, *_ = measured[(4, "quiet")]
    assert detect is not None, "heartbeat 4 s: the worker never noticed a 12 s partition"
    assert 0 < detect <= 2 + 1 + 1.5, detect  # a heartbeat every 2 s, the 1 s user timeout, slack


def test_a_busy_worker_notices_by_its_acks_whatever_the_heartbeat(measured):
    _status, detect, *_ = measured[(0, "busy")]
    assert detect is not None and 0 < detect <= 0.5 + 1 + 1.5, detect

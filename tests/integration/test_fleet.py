"""A fleet over real SSH (tests/nethosts.py): eleven namespace hosts, a broker host, two drivers
and eight workers, in one sweep of ``machines: [1, 2, 4, 8]`` × ``drivers: [1, 2]``; and a worker
host that does not answer when a sweep starts.

h1 runs the broker (a Redis the sweep provisions), h2 and h3 are the drivers, h4..h11 the workers.
Each task sleeps a little, so a backlog's work spreads over the workers by their pace, not by
which one added the queue first.
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import cmx, query, write
from tests.integration.test_multihost import _describe, _is_ssh
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("nethosts_can_be_made")]

TASKS = 240
WORKERS = [f"h{i}" for i in range(4, 12)]
DRIVERS = ["h2", "h3"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    with NetHosts(root / "net", 11) as net:
        inv = net.inventory(
            root / "fleet.yml",
            {"brokers": ["h1"], "backends": ["h1"], "drivers": DRIVERS, "workers": WORKERS},
            workdir_root=root / "hosts",
            seeded=True,
        )
        exp = write(
            root / "fleet.yaml",
            f"""
            name: fleet
            workload: {{name: concurrent_sleep, params: {{tasks: {TASKS}, sleep_s: 0.02}}}}
            fixed: {{pool: threads, concurrency: 4, prefetch_multiplier: 1, broker: redis}}
            matrix: {{machines: [1, 2, 4, 8], drivers: [1, 2]}}
            limits: {{run_timeout: 2m}}
        """,
        )
        db = root / "results" / "cmx.duckdb"
        started = time.monotonic()
        proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=1800)
        seconds = time.monotonic() - started
        print(f"fleet sweep: {seconds:.1f} s for 8 runs on 11 hosts")
        left = {h.name: [_describe(p) for p in net.pids(h) if not _is_ssh(p)] for h in net.hosts}
        yield net, root, db, proc, left


def test_the_fleet_sweep_passes(fleet):
    _, _, db, proc, _ = fleet
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert query(db, "SELECT count(*), count(*) FILTER (WHERE status = 'ok') FROM runs") == [(8, 8)]


def test_machines_n_puts_work_on_exactly_n_hosts_each_at_least_half_its_share(fleet):
    _, _, db, _, _ = fleet
    rows = query(
        db,
        """
        SELECT r.machines, r.drivers, t.host, count(DISTINCT t.task_id)
        FROM runs r JOIN task_times t USING (run_id) WHERE t.state = 'SUCCESS'
        GROUP BY ALL ORDER BY ALL""",
    )
    by_run: dict[tuple, dict[str, int]] = {}
    for machines, drivers, host, n in rows:
        by_run.setdefault((machines, drivers), {})[host] = n
    assert sorted(by_run) == [(m, d) for m in (1, 2, 4, 8) for d in (1, 2)]
    for (machines, drivers), hosts in by_run.items():
        assert sorted(hosts) == sorted(WORKERS[:machines]), (machines, drivers, hosts)
        assert sum(hosts.values()) == TASKS
        assert min(hosts.values()) * machines / TASKS >= 0.5, (machines, drivers, hosts)
    shares = query(
        db,
        """
        SELECT r.machines, m.value FROM runs r JOIN metrics m USING (run_id)
        WHERE m.name = 'host_share_min' ORDER BY ALL""",
    )
    assert [m for m, _ in shares] == [2, 2, 4, 4, 8, 8]
    assert all(share * machines >= 0.5 for machines, share in shares), shares


def test_each_driver_publishes_its_share_and_the_rates_are_stored(fleet):
    _, _, db, _, _ = fleet
    rows = query(
        db,
        """
        SELECT r.machines, r.drivers, t.publisher_host, count(DISTINCT t.task_id)
        FROM runs r JOIN task_times t USING (run_id) GROUP BY ALL ORDER BY ALL""",
    )
    for machines in (1, 2, 4, 8):
        assert [(h, n) for m, d, h, n in rows if m == machines and d == 1] == [("h2", TASKS)]
        assert [(h, n) for m, d, h, n in rows if m == machines and d == 2] == [("h2", TASKS // 2), ("h3", TASKS // 2)]
    rates = query(
        db,
        """
        SELECT r.drivers, m.name, m.value FROM runs r JOIN metrics m USING (run_id)
        WHERE m.name IN ('publish_rate', 'publish_rate_min_driver') ORDER BY ALL""",
    )
    assert sum(1 for d, name, _ in rates if name == "publish_rate_min_driver") == 4
    assert all(d == 2 and v > 0 for d, name, v in rates if name == "publish_rate_min_driver"), rates
    assert all(v > 0 for _, name, v in rates if name == "publish_rate")


def test_nothing_of_a_run_outlives_it_on_any_host(fleet):
    *_, left = fleet
    assert left == {f"h{i}": [] for i in range(1, 12)}


def test_an_unreachable_worker_host_fails_only_the_runs_that_need_it(fleet, tmp_path):
    net, root, *_ = fleet
    by_name = {h.name: h for h in net.hosts}
    inv = tmp_path / "ghost.yml"
    inv.write_text(f"""
all:
  vars:
    ansible_user: root
    ansible_ssh_private_key_file: {net.key}
    ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
    ansible_python_interpreter: /usr/bin/python3
    python_env_interpreter: /usr/bin/python3
  hosts:
    h1: {{ansible_host: {by_name['h1'].address}, cmx_workdir: {root}/hosts/h1}}
    h2: {{ansible_host: {by_name['h2'].address}, cmx_workdir: {root}/hosts/h2}}
    h4: {{ansible_host: {by_name['h4'].address}, cmx_workdir: {root}/hosts/h4}}
    ghost: {{ansible_host: {net.subnet}.99, cmx_workdir: {tmp_path}/ghost}}
  children:
    brokers: {{hosts: {{h1: }}}}
    drivers: {{hosts: {{h2: }}}}
    workers: {{hosts: {{h4: , ghost: }}}}
""")
    exp = write(
        tmp_path / "e.yaml",
        """
        name: ghost
        workload: {name: concurrent_sleep, params: {tasks: 20, sleep_s: 0.01}}
        fixed: {pool: threads, concurrency: 2, broker: redis}
        matrix: {machines: [1, 2]}
        limits: {run_timeout: 1m}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = dict(query(db, "SELECT machines, status || ': ' || coalesce(error, '') FROM runs"))
    assert runs[1] == "ok: "
    assert runs[2].startswith("failed: host ghost was unreachable when the sweep started"), runs


def test_a_stream_from_two_drivers_keeps_the_whole_rate_and_each_drivers_clock(tmp_path):
    """Two drivers each send half a stream at half the rate: the run's publish rate is the whole
    rate, the slowest driver's about half, and every task's latency counts from its own
    publisher's intended send time (on the controller's clock)."""
    with NetHosts(tmp_path / "net", 5) as net:
        inv = net.inventory(
            tmp_path / "inv.yml",
            {"brokers": ["h1"], "backends": ["h1"], "drivers": ["h2", "h3"], "workers": ["h4", "h5"]},
            workdir_root=tmp_path / "hosts",
            seeded=True,
        )
        exp = write(
            tmp_path / "stream.yaml",
            """
            name: stream-drivers
            workload: {name: throughput, params: {tasks: 300, mode: stream, rate: 100}}
            fixed: {pool: threads, concurrency: 2, broker: redis, machines: 2, drivers: 2}
            limits: {run_timeout: 1m}
        """,
        )
        db = tmp_path / "results" / "cmx.duckdb"
        proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db))
        left = {h.name: [_describe(p) for p in net.pids(h) if not _is_ssh(p)] for h in net.hosts}
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert left == {f"h{i}": [] for i in range(1, 6)}
    assert query(db, "SELECT publisher_host, count(*), count(intended_at) FROM task_times GROUP BY ALL ORDER BY 1") == [
        ("h2", 150, 150),
        ("h3", 150, 150),
    ]
    metrics = dict(query(db, "SELECT name, value FROM metrics"))
    assert 70 <= metrics["publish_rate"] <= 130, metrics["publish_rate"]
    assert 35 <= metrics["publish_rate_min_driver"] <= 65, metrics["publish_rate_min_driver"]
    # Each driver paces its half from the same start: the two schedules interleave over ~3 s.
    [(h2_first, h3_first, h2_last, h3_last)] = query(
        db,
        """
        SELECT min(origin_at) FILTER (WHERE publisher_host = 'h2'), min(origin_at) FILTER (WHERE publisher_host = 'h3'),
               max(origin_at) FILTER (WHERE publisher_host = 'h2'), max(origin_at) FILTER (WHERE publisher_host = 'h3')
        FROM task_times""",
    )
    assert abs(h2_first - h3_first) < 1.0 and abs(h2_last - h3_last) < 1.0
    assert 0 < metrics["latency_p50_s"] < 2.0

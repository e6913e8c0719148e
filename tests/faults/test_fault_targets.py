"""A fault's TARGET (issue 39): ``kill_worker@T:2`` strikes the run's second worker host, not the
first, and ``:all`` every worker host at once. Real workers over real SSH on test hosts in
network namespaces (tests/nethosts.py): h1 runs the sweep's own Redis and the driver, h2 and h3
are the run's worker hosts 1 and 2. What is checked is what cmx stored: the ``faults`` rows name
the host struck and the process killed there, and the tasks say which worker stopped.
"""

from __future__ import annotations

import pytest

from tests.conftest import cmx, query, write
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.usefixtures("nethosts_can_be_made")]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("fault-targets")
    with NetHosts(root / "net", 3) as net:
        inv = net.inventory(
            root / "lab.yml",
            {"brokers": ["h1"], "drivers": ["h1"], "workers": ["h2", "h3"]},
            workdir_root=root / "hosts",
            seeded=True,
        )
        yield net, inv, root


def _pids(db, run_id: str, host: str) -> set[int]:
    return {
        p
        for (p,) in query(
            db, "SELECT DISTINCT pid FROM tasks WHERE run_id = ? AND host = ? AND pid IS NOT NULL", [run_id, host]
        )
    }


def test_a_fault_strikes_the_worker_host_its_target_names(lab):
    net, inv, root = lab
    exp = write(
        root / "targets.yaml",
        """
        name: fault-targets
        # stream 1000 tasks at 100/s over both worker hosts; each run's kill comes 1.5 s in, and
        # the stream goes on 8 s more: time for a replacement to start over SSH on a loaded machine
        workload: {name: throughput, params: {tasks: 1000, mode: stream, rate: 100}}
        fixed: {pool: threads, concurrency: 2, broker: redis, machines: 2, prefetch_multiplier: 1}
        matrix:
          fault: [kill_worker@1.5s:2, kill_worker@1.5s:all]
        limits: {run_timeout: 2m, settle: 3s, fault_restart: 500ms}
        on_error: continue
    """,
    )
    db = root / "targets" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = dict(query(db, "SELECT fault, run_id FROM runs"))
    assert set(runs) == {"kill_worker@1.5:2", "kill_worker@1.5:all"}, runs

    # :2 strikes h3 (the run's second worker host) alone: its faults row names it and the pid it
    # killed, a pid of h3's that ran tasks until the strike and none after; h2's worker was never
    # touched (one process ran all its tasks), h3 ran the rest in its replacement.
    run_id = runs["kill_worker@1.5:2"]
    rows = query(db, "SELECT idx, host, kind, pid, error, struck_at FROM fault_times WHERE run_id = ?", [run_id])
    assert [(i, h, k, e) for i, h, k, _, e, _ in rows] == [(0, "h3", "kill_worker", None)], rows
    ((_, _, _, killed, _, struck),) = rows
    assert killed in _pids(db, run_id, "h3"), (killed, _pids(db, run_id, "h3"))
    assert len(_pids(db, run_id, "h3")) == 2 and len(_pids(db, run_id, "h2")) == 1, (
        _pids(db, run_id, "h2"),
        _pids(db, run_id, "h3"),
    )
    assert query(
        db,
        "SELECT count(*) FROM task_times WHERE run_id = ? AND pid = ? AND finished_at > ?",
        [run_id, killed, struck + 0.5],
    ) == [(0,)]
    assert (
        query(
            db,
            "SELECT count(*) FROM task_times WHERE run_id = ? AND host = 'h2' AND finished_at > ?",
            [run_id, struck + 0.5],
        )[0][0]
        > 0
    )  # the first host's worker went on
    (at,) = query(db, "SELECT value FROM metrics WHERE run_id = ? AND name = 'fault_at_s'", [run_id])[0]
    assert 1.5 <= at < 3.0, at

    # :all strikes both hosts at once: one row per host, the same fault, each host's own worker
    # killed (it finished nothing after) and replaced (the fault ends once the replacement is
    # ready, fault_restart after the death); whichever replacement consumes first may drain
    # what is left, so at least one of them ran tasks.
    run_id = runs["kill_worker@1.5:all"]
    rows = query(
        db,
        "SELECT idx, host, pid, error, struck_at, ended_at FROM fault_times WHERE run_id = ? ORDER BY host",
        [run_id],
    )
    assert [(i, h, e) for i, h, _, e, _, _ in rows] == [(0, "h2", None), (0, "h3", None)], rows
    for _, host, killed, _, struck, ended in rows:
        assert killed in _pids(db, run_id, host), (host, killed, _pids(db, run_id, host))
        assert ended - struck >= 0.5, (host, struck, ended)
        assert query(
            db,
            "SELECT count(*) FROM task_times WHERE run_id = ? AND pid = ? AND finished_at > ?",
            [run_id, killed, struck + 0.5],
        ) == [(0,)]
    assert _pids(db, run_id, "h2") != {rows[0][2]} or _pids(db, run_id, "h3") != {rows[1][2]}, rows
    assert abs(rows[0][4] - rows[1][4]) < 1.0, rows  # at once (each host's clock, corrected)

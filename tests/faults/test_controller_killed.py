"""Faults: `kill -9` of the controller (`cmx run`) mid-drive (issue #14 item 4, issue #11 item 2).

At seeded random points (which run of the invocation, how far into its drive) the controller is
killed; within a minute no process cmx started (agent, supervisor, worker and its children,
sampler, driver) may be left on any host: each host's agent sees its stdin end and stops
everything. Then `cmx run` again resumes; at the end every cell is ok exactly once and each
killed run shows as abandoned in `cmx status`. Once on this machine (local agent), once over
real SSH to two network-namespace hosts (tests/nethosts.py).

3 kill points in CI; `pytest -m slow` runs 8 more per target.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import CMX, REPO, cmx, driving, query, write
from tests.hostseed import seed_local
from tests.nethosts import NetHosts, missing
from tests.prereqs import require

pytestmark = [pytest.mark.integration]

SEED = 20240611
CELLS = 5
DRIVE_S = 3.0  # each run streams for about this long
#: What the fault may leave for at most this long on any host.
GONE_WITHIN_S = 60.0
CMX_PROCESS_MARKS = (
    "cmx.workloads.host.agent",
    "cmx.workloads.host.supervisor",
    "cmx.workloads.app.worker",
    "cmx.workloads.host.sampler",
    "cmx.workloads.app.driver",
    "celery",
)


def _experiment(root: Path, repeats: int) -> Path:
    rate = 100
    return write(
        root / "killed.yaml",
        f"""
        name: killed
        repeats: {repeats}
        workload: {{name: throughput, params: {{tasks: {int(DRIVE_S * rate)}, mode: stream, rate: {rate}}}}}
        fixed: {{broker: redis, backend: none}}
        matrix: {{pool: [threads, solo, prefork], concurrency: [1, 2]}}
        exclude: [{{pool: solo, concurrency: 2}}]
        limits: {{run_timeout: 2m}}
    """,
    )


def _points(seed: int, n: int) -> list[tuple[int, float]]:
    """(which run of the invocation to kill in: 1 or 2, seconds into its drive)."""
    rng = random.Random(seed)
    return [(rng.randint(1, 2), round(rng.uniform(0.2, DRIVE_S - 0.8), 2)) for _ in range(n)]


def _kill_mid_drive(exp: Path, inv: Path, db: Path, workdir: Path, which: int, after_s: float) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [*CMX, "run", str(exp), "--inventory", str(inv), "--db", str(db)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seen: set[str] = set()
    deadline = time.monotonic() + 600
    try:
        while len(seen) < which:
            assert proc.poll() is None, f"cmx run ended ({proc.returncode}) before its run #{which} drove"
            assert time.monotonic() < deadline, f"run #{which} never drove"
            seen |= driving(workdir)
            time.sleep(0.05)
        time.sleep(after_s)
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)


def _local_leftovers(workdir: Path) -> list[str]:
    """cmx processes of this test's hosts on this machine (other sweeps may share it)."""
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "cwd", "status"]):
        if p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        line = " ".join(p.info["cmdline"] or [])
        if str(workdir) in line + " " + (p.info["cwd"] or "") and any(m in line for m in CMX_PROCESS_MARKS):
            left.append(f"{p.info['pid']}: {line[:160]}")
    return left


def _namespace_leftovers(net: NetHosts, services: tuple[str, ...] = ("redis-server",)) -> list[str]:
    """Every process in the hosts' namespaces but sshd and the ``services`` (process names) the sweep
    provisions (by default its Redis: a service of the sweep, stopped by its end; not a process of a
    run). ``services=()``: after a sweep's end, nothing but sshd."""
    left = []
    for h in net.hosts:
        for pid in net.pids(h):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
                if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
                    continue
            except OSError:
                continue
            if not comm.startswith("sshd") and comm not in services:
                left.append(f"{h.name} {pid}: {line}")
    return left


def _wait_gone(leftovers) -> tuple[float, list[str]]:
    t0 = time.monotonic()
    left = leftovers()
    while left and time.monotonic() - t0 < GONE_WITHIN_S:
        time.sleep(0.5)
        left = leftovers()
    return time.monotonic() - t0, left


def _status_row(db: Path) -> dict[str, str]:
    proc = cmx("status", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = next(ln for ln in lines if "abandoned" in ln)
    row = next(ln for ln in lines if ln.strip("│ ").startswith("killed "))
    return dict(zip([c.strip() for c in header.strip("┃").split("┃")], [c.strip() for c in row.strip("│").split("│")]))


def _kill_and_resume(root: Path, inv: Path, workdir: Path, leftovers, points: list[tuple[int, float]]) -> None:
    repeats = 1 + len(points) // 3  # each killed invocation may complete one run before: some stay to do
    exp = _experiment(root, repeats)
    db = root / "results" / "cmx.duckdb"
    for which, after_s in points:
        _kill_mid_drive(exp, inv, db, workdir, which, after_s)
        took, left = _wait_gone(leftovers)
        print(f"killed in run #{which} {after_s} s into its drive: every cmx process gone after {took:.1f} s")
        assert left == [], f"still running {GONE_WITHIN_S:g} s after the controller was killed: {left}"
    done = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    per_run = query(db, "SELECT cell_id, repeat, count(*) FILTER (WHERE status = 'ok') FROM runs GROUP BY ALL")
    assert len(per_run) == CELLS * repeats and all(ok == 1 for *_, ok in per_run), per_run
    without_end = query(
        db, "SELECT count(*) FROM run_starts s LEFT JOIN run_ends e USING (run_id) WHERE e.run_id IS NULL"
    )[0][0]
    assert without_end == len(points), per_run  # the killed runs, and only they
    row = _status_row(db)
    assert row["abandoned"] == str(len(points)) and row["ok"] == str(CELLS * repeats), row
    assert row["running"] == "0" and row["failed"] == "0" and row["interrupted"] == "0", row
    assert leftovers() == []


def _local_inventory(root: Path, workdir: Path) -> Path:
    seed_local(workdir / "localhost")  # provisioned already (tests/hostseed.py): the subject is the kill
    return write(
        root / "local.yml",
        f"""
        all:
          vars:
            ansible_connection: local
            ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"
            python_env_interpreter: "{{{{ ansible_playbook_python }}}}"
            cmx_workdir: {workdir}/localhost
          children:
            brokers: {{hosts: {{localhost: {{broker_url: "redis://127.0.0.1:6379/0"}}}}}}
            workers: {{hosts: {{localhost: }}}}
            drivers: {{hosts: {{localhost: }}}}
    """,
    )


def _local(tmp_path: Path, points) -> None:
    workdir = tmp_path / "hosts"
    _kill_and_resume(tmp_path, _local_inventory(tmp_path, workdir), workdir, lambda: _local_leftovers(workdir), points)


def _ssh(tmp_path: Path, points) -> None:
    require(missing())
    with NetHosts(tmp_path / "net", 2) as net:
        workdir = tmp_path / "hosts"
        inv = net.inventory(
            tmp_path / "lab.yml",
            {"brokers": ["h1"], "drivers": ["h1"], "workers": ["h2"]},
            workdir_root=workdir,
            seeded=True,
        )
        _kill_and_resume(tmp_path, inv, workdir, lambda: _namespace_leftovers(net) + _local_leftovers(workdir), points)


def test_killed_controller_leaves_nothing_on_this_machine_and_resume_completes(tmp_path):
    _local(tmp_path, _points(SEED, 3))


def test_killed_controller_leaves_nothing_on_ssh_hosts_and_resume_completes(tmp_path):
    _ssh(tmp_path, _points(SEED + 1, 3))


@pytest.mark.slow
@pytest.mark.parametrize("target", ["local", "ssh"])
def test_more_kill_points(tmp_path, target):
    (_local if target == "local" else _ssh)(tmp_path, _points(SEED + 2, 8))

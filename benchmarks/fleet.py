"""The moonshot, measured: 100 cells × 3 repeats of a small workload on three SSH hosts.

    python benchmarks/fleet.py                    # 100 cells x 3 repeats (needs root: tests/nethosts.py)
    python benchmarks/fleet.py --concurrency 1,2 --repeats 1   # a smaller sweep, same figures

Three network-namespace hosts with their own sshd (tests/nethosts.py): h1 runs the broker (Redis
and RabbitMQ, provisioned by the sweep) and the driver, h2 and h3 a worker each (``machines: 2``).
The matrix is broker 2 × pool 5 × concurrency 1..10 (100 cells) of ``throughput`` (200 tasks,
backlog). It runs the real ``cmx run`` and prints the sweep's wall time, the time before the first
run (provisioning, services, agents), the harness share (the runs' stored ``harness_overhead_s``
over the sweep's wall time) and each stage's total and median seconds from ``run_ends``. Issue
#29's target: under 30 minutes on this 2-core machine (shared with whatever else runs on it).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_S = 30 * 60.0
POOLS = "prefork,threads,solo,gevent,eventlet"


def sweep(tmp: Path, inv: Path, args) -> tuple[float, float, Path]:
    matrix = {"broker": args.brokers.split(","), "pool": args.pools.split(","),
              "concurrency": [int(c) for c in args.concurrency.split(",")]}
    exp = tmp / "fleet.yaml"
    exp.write_text(json.dumps({"name": "fleet-bench", "repeats": args.repeats,
                               "workload": {"name": "throughput", "params": {"tasks": args.tasks, "mode": "backlog"}},
                               "fixed": {"backend": "none", "machines": 2}, "matrix": matrix,
                               "limits": {"run_timeout": "3m"}, "on_error": "continue"}))
    db = tmp / "results" / "cmx.duckdb"
    venv = REPO / ".venv" / "bin" / "python"
    launched = time.time()
    t0 = time.monotonic()
    proc = subprocess.run([str(venv if venv.exists() else sys.executable), "-m", "cmx.engine.cli.main", "run", str(exp),
                           "--db", str(db), "--inventory", str(inv)], cwd=REPO, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=4 * 3600)
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 1):
        sys.exit(f"cmx run failed ({proc.returncode}): {proc.stdout[-1500:]} {proc.stderr[-1500:]}")
    return wall, launched, db


def report(db: Path, wall: float, launched: float) -> None:
    from cmx.engine.results import db as results_db

    with results_db.connect(db, read_only=True) as con:
        rows = con.execute("""
            SELECT r.status, epoch(r.started_at), epoch(e.finished_at) - epoch(r.started_at), e.stage_seconds,
                   (SELECT value FROM metrics m WHERE m.run_id = r.run_id AND m.name = 'harness_overhead_s')
            FROM runs r JOIN run_ends e USING (run_id)""").fetchall()
    statuses = [r[0] for r in rows]
    first = min((r[1] for r in rows), default=launched) - launched
    harness = sum(r[4] or 0.0 for r in rows)
    stages: dict[str, list[float]] = {}
    for r in rows:
        for k, v in json.loads(r[3] or "{}").items():
            stages.setdefault(k, []).append(v)
    print(f"runs: {len(rows)} ({statuses.count('ok')} ok)")
    print(f"  sweep wall time        {wall:9.1f} s  ({wall / 60:.1f} min; target under {TARGET_S / 60:g} min: "
          f"{'met' if wall < TARGET_S else 'NOT met'})")
    print(f"  before the first run   {first:9.1f} s  (provisioning, services, agents)")
    print(f"  runs' wall time        {sum(r[2] for r in rows):9.1f} s  (median {statistics.median([r[2] for r in rows] or [0]):.2f} s)")
    print(f"  harness                {harness:9.1f} s  ({100 * harness / wall:.0f} % of the sweep; median "
          f"{statistics.median([r[4] or 0.0 for r in rows] or [0]):.2f} s per run)")
    print(f"  {'stage':<22} {'total s':>9} {'median s':>9}")
    for k, v in stages.items():
        print(f"  {k:<22} {sum(v):9.1f} {statistics.median(v):9.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="redis,rabbitmq")
    ap.add_argument("--pools", default=POOLS)
    ap.add_argument("--concurrency", default=",".join(str(c) for c in range(1, 11)))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--keep", action="store_true", help="keep the temporary dir")
    args = ap.parse_args()
    from tests.nethosts import NetHosts, missing

    if missing():
        sys.exit(f"not measured: {missing()}")
    tmp = Path(tempfile.mkdtemp(prefix="cmx-fleet-"))
    try:
        with NetHosts(tmp / "net", 3) as net:
            inv = net.inventory(tmp / "fleet.yml", {"brokers": ["h1"], "backends": ["h1"], "drivers": ["h1"],
                                                    "workers": ["h2", "h3"]}, workdir_root=tmp / "hosts")
            wall, launched, db = sweep(tmp, inv, args)
            report(db, wall, launched)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

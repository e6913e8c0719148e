"""The moonshot, measured: 100 cells × 3 repeats of a small workload on three SSH hosts.

    python benchmarks/fleet.py                    # 100 cells x 3 repeats (needs root: tests/nethosts.py)
    python benchmarks/fleet.py --concurrency 1,2 --repeats 1   # a smaller sweep, same figures
    python benchmarks/fleet.py --timeout 40       # stop after 40 min: the runs done, and all at their pace

Three network-namespace hosts with their own sshd (tests/nethosts.py): h1 runs the broker (Redis
and RabbitMQ, provisioned by the sweep) and the driver, h2 and h3 a worker each (``machines: 2``).
The matrix is broker 2 × pool 5 × concurrency 1..10 (100 cells) of ``throughput`` (200 tasks,
backlog); solo, which runs one task at a time, varies its prefetch instead of concurrency. It runs
the real ``cmx run`` and prints the sweep's wall time, the time before the first run
(provisioning, services, agents), the harness share (the runs' stored ``harness_overhead_s`` over
the sweep's wall time) and each stage's total and median seconds from ``run_ends``. Issue #29's
target: under 30 minutes on this 2-core machine (shared with whatever else runs on it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
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
    brokers, pools = args.brokers.split(","), args.pools.split(",")
    concurrency = [int(c) for c in args.concurrency.split(",")]
    matrix = {"broker": brokers, "pool": pools, "concurrency": concurrency}
    doc = {
        "name": "fleet-bench",
        "repeats": args.repeats,
        "workload": {"name": "throughput", "params": {"tasks": args.tasks, "mode": "backlog"}},
        "fixed": {"backend": "none", "machines": 2},
        "matrix": matrix,
        "limits": {"run_timeout": "3m"},
        "on_error": "continue",
    }
    more = [c for c in concurrency if c != 1]
    if "solo" in pools and more:
        # A solo worker runs one task at a time (a cell asking more fails as it should): its
        # cells vary the prefetch instead, so the sweep keeps its number of cells.
        doc["exclude"] = [{"pool": "solo", "concurrency": more}]
        from cmx.workloads.vocab.dimensions import BY_NAME

        prefetch = [p for p in range(1, 100) if p != BY_NAME["prefetch_multiplier"].default][: len(more)]
        doc["include"] = [
            {"broker": b, "pool": "solo", "concurrency": 1, "prefetch_multiplier": p} for b in brokers for p in prefetch
        ]
    exp = tmp / "fleet.yaml"
    exp.write_text(json.dumps(doc))
    db = tmp / "results" / "cmx.duckdb"
    venv = REPO / ".venv" / "bin" / "python"
    launched = time.time()
    t0 = time.monotonic()
    log = tmp / "cmx-run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                str(venv if venv.exists() else sys.executable),
                "-m",
                "cmx.cli.main",
                "run",
                str(exp),
                "--db",
                str(db),
                "--inventory",
                str(inv),
            ],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            proc.wait(args.timeout * 60)
        except BaseException as exc:  # SIGTERM (see main) or Ctrl-C here: the controller stops its run first
            if not isinstance(exc, subprocess.TimeoutExpired):
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                raise
            # As Ctrl-C: the run under way is stopped and stored, the services stopped.
            print(f"-- stopped after {args.timeout:g} min (--timeout): the figures below are of the runs done")
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(300)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    wall = time.monotonic() - t0
    stopped = wall >= args.timeout * 60  # then a controller killed while stopping services still has figures
    if proc.returncode not in (0, 1, 130) and not stopped:
        sys.exit(f"cmx run failed ({proc.returncode}): {log.read_text(errors='replace')[-3000:]}")
    return wall, launched, db


def report(db: Path, wall: float, launched: float, planned: int) -> None:
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
    print(
        f"runs: {len(rows)} of {planned} ({statuses.count('ok')} ok); load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(
        f"  sweep wall time        {wall:9.1f} s  ({wall / 60:.1f} min; target under {TARGET_S / 60:g} min: "
        f"{'met' if wall < TARGET_S and len(rows) >= planned else 'NOT met'})"
    )
    if 0 < len(rows) < planned:  # stopped by --timeout: at the pace of the runs done
        whole = first + (wall - first) * planned / len(rows)
        print(f"  all {planned} at this pace  {whole:9.1f} s  ({whole / 60:.1f} min, projected)")
    print(f"  before the first run   {first:9.1f} s  (provisioning, services, agents)")
    print(
        f"  runs' wall time        {sum(r[2] for r in rows):9.1f} s  "
        f"(median {statistics.median([r[2] for r in rows] or [0]):.2f} s)"
    )
    print(
        f"  harness                {harness:9.1f} s  ({100 * harness / wall:.0f} % of the sweep; median "
        f"{statistics.median([r[4] or 0.0 for r in rows] or [0]):.2f} s per run)"
    )
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
    ap.add_argument(
        "--timeout",
        type=float,
        default=240,
        help="minutes the sweep may take: then it is stopped "
        "as by Ctrl-C and the runs done are reported, with the whole sweep's time at their pace",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary dir")
    args = ap.parse_args()
    from tests.nethosts import NetHosts, missing

    # SIGTERM (timeout(1)) unwinds like Ctrl-C: the sweep is stopped, the namespaces removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))

    if missing():
        sys.exit(f"not measured: {missing()}")
    tmp = Path(tempfile.mkdtemp(prefix="cmx-fleet-"))
    try:
        with NetHosts(tmp / "net", 3) as net:
            inv = net.inventory(
                tmp / "fleet.yml",
                {"brokers": ["h1"], "backends": ["h1"], "drivers": ["h1"], "workers": ["h2", "h3"]},
                workdir_root=tmp / "hosts",
            )
            wall, launched, db = sweep(tmp, inv, args)
            planned = (
                len(args.brokers.split(","))
                * len(args.pools.split(","))
                * len(args.concurrency.split(","))
                * args.repeats
            )
            report(db, wall, launched, planned)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

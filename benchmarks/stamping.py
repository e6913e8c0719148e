"""What per-task stamping costs the workers: consume rate with stamps on and off, per pool, in one sweep.

    python benchmarks/stamping.py                          # every pool, 3 repeats, 10,000 tasks, redis
    python benchmarks/stamping.py --repeats 5 --tasks 20000 --pools threads,prefork --broker rabbitmq

One real ``cmx run`` of the ``throughput`` workload (backlog mode, fast publisher) whose matrix is
pool × ``params.stamping`` (true, false), run with ``--shuffle``: the repeats come in rounds and the
cells of a round in a random order, so stamping on and off are interleaved and a drift of the
machine falls on both. The figure is ``drained_rate``: tasks / time from "start consuming" until
the workers' own completion counts (``cmx_progress``) reach the backlog, which needs no stamps,
so the two sides are measured the same way.

Beside it, a second view: the workers' CPU seconds per 1000 tasks (every
worker process, the whole run, from the sampler's per-tick CPU %), on and off; their difference
is what stamping costs in CPU (less disturbed by a busy machine than wall time, not immune to it).

Printed per pool: the median consume rate of each side, the overhead
100 × (1 − on / off) with the 95 % bootstrap interval of the difference of medians
(analysis/stats.py), and whether the target (≤ 2 %) is met: "median only" when the median overhead is
within it but the interval is not (on a busy machine the interval is wide;
more repeats or tasks narrow it), "yes (interval)" when the whole interval is, "no" otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_PCT = 2.0
POOLS = "prefork,threads,gevent,eventlet,solo"


def run_sweep(args, tmp: Path) -> Path:
    pools = args.pools.split(",")
    doc = {
        "name": "stamping-bench",
        "repeats": args.repeats,
        "workload": {"name": "throughput", "params": {"tasks": args.tasks, "mode": "backlog", "publisher": "fast"}},
        "fixed": {"broker": args.broker, "backend": "none", "concurrency": args.concurrency},
        "matrix": {"pool": [p for p in pools if p != "solo"] or ["solo"], "params.stamping": [True, False]},
        # solo runs one task at a time: its cells ask for concurrency 1.
        "exclude": [{"pool": "solo"}] if pools == ["solo"] else [],
        "include": [{"pool": "solo", "concurrency": 1, "params.stamping": s} for s in (True, False)]
        if "solo" in pools
        else [],
        "limits": {"run_timeout": "5m"},
        "on_error": "continue",
    }
    exp = tmp / "stamping.yaml"
    exp.write_text(json.dumps(doc, indent=2))  # JSON is YAML
    db = tmp / "results" / "cmx.duckdb"
    cmd = [sys.executable, "-m", "cmx.cli.main", "run", str(exp), "--db", str(db), "--shuffle", str(args.seed)]
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd,
        cwd=REPO,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=6 * 3600,
    )
    print(
        f"sweep: {len(pools) * 2 * args.repeats} runs in {time.monotonic() - t0:.0f} s "
        f"({args.tasks} no-op tasks each, {args.broker}, concurrency {args.concurrency}, shuffle seed {args.seed})"
    )
    if proc.returncode not in (0, 1):
        sys.exit(f"cmx run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return db


def overhead(on: list[float], off: list[float]) -> tuple[float, float, float]:
    """Overhead % of the medians, and its 95 % interval (bootstrap of median(on) − median(off))."""
    from cmx.analysis.stats import compare_samples

    base = statistics.median(off)
    c = compare_samples(off, on, "higher")  # its diff: median(on) − median(off), a cost is negative
    lo, hi = c.diff_low, c.diff_high
    if lo is None:  # fewer than 3 runs a side: no interval
        lo = hi = statistics.median(on) - base
    return 100 * (1 - statistics.median(on) / base), -100 * hi / base, -100 * lo / base


def report(db: Path, pools: list[str]) -> bool:
    from cmx.engine.results import db as results_db

    with results_db.connect(db, read_only=True) as con:
        rows = con.execute("""SELECT r.pool, r."params.stamping", m.value FROM runs r
                              JOIN metrics m USING (run_id) WHERE m.name = 'drained_rate'
                              ORDER BY r.started_at""").fetchall()
        cpu = con.execute("""
            WITH ticks AS (
                SELECT run_id, cpu_percent / 100 * (ts - lag(ts) OVER (PARTITION BY run_id, host, pid ORDER BY ts)) AS s
                FROM samples WHERE role IN ('worker', 'worker-child'))
            SELECT r.pool, r."params.stamping", 1000 * sum(s) / any_value(r."params.tasks")
            FROM ticks JOIN runs r USING (run_id) WHERE r.status = 'ok'
            GROUP BY r.run_id, r.pool, r."params.stamping"
            """).fetchall()
        bad = con.execute(
            "SELECT pool, \"params.stamping\", status, count(*) FROM runs WHERE status <> 'ok' GROUP BY ALL"
        ).fetchall()
    for pool, stamping, status, n in bad:
        print(f"  ! {n} run(s) {pool} stamping={stamping}: {status}")
    rates: dict[tuple[str, bool], list[float]] = {}
    for pool, stamping, value in rows:
        rates.setdefault((pool, bool(stamping)), []).append(value)
    cpu_s: dict[tuple[str, bool], list[float]] = {}
    for pool, stamping, value in cpu:
        cpu_s.setdefault((pool, bool(stamping)), []).append(value)
    print(f"consume rate (drained_rate, tasks/s; median of n) and what stamping costs (target ≤ {TARGET_PCT:g} %):")
    print(f"  {'pool':<9}{'on':>9}{'off':>9}  {'n':>3}  {'overhead':>9}  {'95 % interval':<19} met")
    all_met = True
    for pool in pools:
        on, off = rates.get((pool, True), []), rates.get((pool, False), [])
        if len(on) < 2 or len(off) < 2:
            print(f"  {pool:<9} not enough runs (on {len(on)}, off {len(off)})")
            all_met = False
            continue
        pct, lo, hi = overhead(on, off)
        met = (
            "yes (interval)"
            if hi <= TARGET_PCT
            else "median only (interval too wide to tell)"
            if pct <= TARGET_PCT
            else "no"
        )
        all_met &= met != "no"
        print(
            f"  {pool:<9}{statistics.median(on):9.0f}{statistics.median(off):9.0f}  {min(len(on), len(off)):>3}  "
            f"{pct:8.1f} %  [{lo:6.1f}, {hi:6.1f}] %  {met}"
        )
    print("workers' CPU seconds per 1000 tasks (whole run; median):")
    for pool in pools:
        on, off = cpu_s.get((pool, True), []), cpu_s.get((pool, False), [])
        if on and off:
            c_on, c_off = statistics.median(on), statistics.median(off)
            print(
                f"  {pool:<9} on {c_on:6.3f}  off {c_off:6.3f}  stamping {1000 * (c_on - c_off):6.1f} µs/task "
                f"({100 * (c_on / c_off - 1):5.1f} % of the workers' CPU)"
            )
    return all_met


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pools", default=POOLS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--broker", default="redis")
    ap.add_argument("--seed", type=int, default=1, help="the --shuffle seed")
    ap.add_argument("--keep", action="store_true", help="keep the temporary results dir")
    ap.add_argument("--db", type=Path, help="report on the results database of an earlier sweep (--keep) instead")
    args = ap.parse_args()
    if args.db:
        sys.exit(0 if report(args.db, args.pools.split(",")) else 1)
    if args.repeats < 3:
        sys.exit("--repeats: at least 3 (an interval needs them)")
    tmp = Path(tempfile.mkdtemp(prefix="cmx-stamping-"))
    try:
        met = report(run_sweep(args, tmp), args.pools.split(","))
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()

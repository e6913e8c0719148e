"""How long `cmx report` takes on a large results database: 50 runs, 1,000,000 task rows.

    .venv/bin/python tests/benchmarks/bench_report.py [--tasks 1000000] [--runs 50]

Not collected by pytest (no test_ prefix). The database is filled with DuckDB SQL
(generate_series), so building it takes seconds too; the figure printed is the CLI's wall time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cmx.engine.results import db  # noqa: E402
from tests.results_fixture import T0, add_run  # noqa: E402

POOLS, CONCURRENCY, BROKERS = (
    ("prefork", "threads", "gevent", "eventlet", "solo"),
    (1, 4, 16, 64, 256),
    ("redis", "rabbitmq"),
)


def fill(path: Path, runs: int, tasks: int) -> None:
    per_run = tasks // runs
    with db.connect(path) as con:
        for i in range(runs):
            dims = {"broker": BROKERS[i % 2], "pool": POOLS[(i // 2) % 5], "concurrency": CONCURRENCY[(i // 10) % 5]}
            run_id = f"run-{i:03d}"
            add_run(
                con,
                "big",
                run_id,
                dims,
                repeat=1 + i // 50,
                metrics={
                    "consume_rate": 1000 + i,
                    "publish_rate": 2000 + i,
                    "makespan_s": 30.0,
                    "latency_p50_s": 0.5,
                    "latency_p99_s": 2.0,
                    "tasks_lost": 0,
                    "peak_rss_bytes": 1e8 + i,
                    "peak_pss_bytes": 5e7 + i,
                    "broker_connections_max": 10,
                },
            )
            # Tasks: one every 30 ms, latency 0.1..2 s; samples: 4 processes every 200 ms for 60 s.
            con.execute(
                """INSERT INTO tasks (run_id, task_id, name, host, pid, sent_at, received_at, started_at,
                               finished_at, state, redelivered)
                           SELECT ?, 't' || g, 'noop', 'w1', 1, ? + g * 0.03, ? + g * 0.03, ? + g * 0.03 + 0.05,
                                  ? + g * 0.03 + 0.1 + (g % 20) * 0.1, 'SUCCESS', false
                           FROM generate_series(1, ?) AS s(g)""",
                [run_id, T0, T0, T0, T0, per_run],
            )
            con.execute(
                """INSERT INTO samples SELECT ?, 'w1', p, CASE WHEN p = 1 THEN 'worker' ELSE 'worker-child' END,
                               ? + k * 0.2, 1e8 + k * 1000, CASE WHEN k % 5 = 0 THEN 5e7 END, 1.0
                           FROM generate_series(0, 299) AS a(k), generate_series(1, 4) AS b(p)""",
                [run_id, T0],
            )
            con.execute(
                """INSERT INTO connections (run_id, host, role, kind, ts, count)
                           SELECT ?, 'b1', 'broker', 'redis', ? + k, 5 + k % 5
                           FROM generate_series(0, 59) AS a(k)""",
                [run_id, T0],
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.duckdb"
        started = time.perf_counter()
        fill(path, args.runs, args.tasks)
        print(f"filled {args.runs} runs, {args.tasks:,} tasks in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "cmx.cli.main", "report", "big", "--db", str(path), "--out", str(Path(tmp) / "out")],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        took = time.perf_counter() - started
        print(p.stdout.strip() or p.stderr[-2000:])
        print(f"cmx report on {args.tasks:,} task rows: {took:.1f} s wall (process start included)")
        sys.exit(p.returncode)


if __name__ == "__main__":
    main()

"""Small hand-made results databases for the analysis tests (no services): runs written through
cmx.engine.results.db, tasks, samples, connections and metrics inserted directly, with values chosen so that
every statistic the tests check can be worked out by hand."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cmx.engine.results import db

T0 = 1_700_000_000.0  # every run "starts" here (epoch seconds), so t_s = ts - T0


def cell_id(dims: dict) -> str:
    return hashlib.sha256(json.dumps(dims, sort_keys=True).encode()).hexdigest()[:12]


def add_run(con, experiment: str, run_id: str, dims: dict, *, repeat: int = 1, status: str = "ok",
            metrics: dict | None = None, tasks=(), samples=(), connections=(), warmup_s: float = 0.0,
            started_at: float = T0, queue_depth=(), sweep_id: str = "s1") -> None:
    """One run: tasks are (task_id, sent_at, started_at, finished_at, state); samples are
    (host, pid, role, ts, rss, pss); connections are (role, kind, ts, count); queue_depth (ts, depth).
    The runs are throughput stream runs (their latency is one a caller feels, so the report shows it)."""
    db.record_run_start(con, experiment=experiment, sweep_id=sweep_id, run_id=run_id, cell_id=cell_id(dims),
                        repeat=repeat, workload="throughput", dims=dims, params={"mode": "stream"}, warmup_s=warmup_s)
    # record_run_start stamps now(); tests need a known start for seconds-since-start.
    con.execute("UPDATE run_starts SET started_at = to_timestamp(?) WHERE run_id = ?", [started_at, run_id])
    db.record_run_end(con, run_id, status, None if status == "ok" else "boom", {})
    for t in tasks:
        tid, sent, start, fin, state = t
        con.execute("INSERT INTO tasks (run_id, task_id, name, host, pid, sent_at, received_at, started_at,"
                    " finished_at, state, redelivered) VALUES (?, ?, 'noop', 'w1', 1, ?, ?, ?, ?, ?, false)",
                    [run_id, tid, sent, start, start, fin, state])
    for host, pid, role, ts, rss, pss in samples:
        con.execute("INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, 1.0)", [run_id, host, pid, role, ts, rss, pss])
    for role, kind, ts, count in connections:
        con.execute("INSERT INTO connections (run_id, host, role, kind, ts, count) VALUES (?, 'b1', ?, ?, ?, ?)",
                    [run_id, role, kind, ts, count])
    for ts, depth in queue_depth:
        con.execute("INSERT INTO queue_depth VALUES (?, ?, ?)", [run_id, ts, depth])
    for name, value in (metrics or {}).items():
        con.execute("INSERT INTO metrics VALUES (?, ?, ?, '')", [run_id, name, value])


BROKERS, POOLS, CONCURRENCY = ("redis", "rabbitmq"), ("prefork", "threads"), (1, 4)


def consume_rate(broker: str, pool: str, concurrency: int, repeat: int) -> float:
    return {"redis": 1000, "rabbitmq": 2000}[broker] + {"prefork": 0, "threads": 100}[pool] + 10 * concurrency + repeat


def build_matrix(path: Path, experiment: str = "exp") -> Path:
    """broker × pool × concurrency (8 cells) × 2 ok repeats, backend fixed to none; plus a failed
    third run of (redis, prefork, 1) whose 2 lost tasks must show but not count in medians.

    Per ok run: consume_rate from :func:`consume_rate`; 10 tasks sent at T0+1+i, finished at
    T0+1+i + (i+1)/10 (latencies 0.1..1.0 s); worker + child sampled at 3 ticks; broker
    connections 2 then 2+concurrency; queue depth 10 - k at T0+1+k.
    """
    with db.connect(path) as con:
        for broker in BROKERS:
            for pool in POOLS:
                for conc in CONCURRENCY:
                    dims = {"broker": broker, "backend": "none", "pool": pool, "concurrency": conc}
                    for repeat in (1, 2):
                        run_id = f"{broker}-{pool}-{conc}-{repeat}"
                        rate = consume_rate(broker, pool, conc, repeat)
                        tasks = [(f"t{i}", T0 + 1 + i, T0 + 1 + i, T0 + 1 + i + (i + 1) / 10, "SUCCESS")
                                 for i in range(10)]
                        samples = [("w1", 10, "worker", T0 + k, 100 * conc + k, 50 * conc + k) for k in (2, 3, 4)]
                        samples += [("w1", 11, "worker-child", T0 + k, 10, 5) for k in (2, 3, 4)]
                        add_run(con, experiment, run_id, dims, repeat=repeat, tasks=tasks, samples=samples,
                                connections=[("broker", broker, T0 + 2, 2), ("broker", broker, T0 + 3, 2 + conc)],
                                queue_depth=[(T0 + 1 + k, 10 - k) for k in range(11)],
                                metrics={"tasks_published": 10, "tasks_completed": 10, "tasks_lost": 0,
                                         "tasks_duplicated": 0, "consume_rate": rate, "publish_rate": 2 * rate,
                                         "makespan_s": 10_000 / rate, "latency_p50_s": 0.55,
                                         "latency_p95_s": 0.955, "latency_p99_s": 0.991,
                                         "peak_rss_bytes": 100 * conc + 4 + 10, "peak_pss_bytes": 50 * conc + 4 + 5,
                                         "broker_connections_max": 2 + conc})
        add_run(con, experiment, "redis-prefork-1-3", {"broker": "redis", "backend": "none", "pool": "prefork",
                                                        "concurrency": 1},
                repeat=3, status="failed", metrics={"tasks_published": 10, "tasks_completed": 8, "tasks_lost": 2,
                                                    "consume_rate": 1.0})
    return path

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


def add_run(
    con,
    experiment: str,
    run_id: str,
    dims: dict,
    *,
    repeat: int = 1,
    status: str = "ok",
    metrics: dict | None = None,
    tasks=(),
    samples=(),
    connections=(),
    warmup_s: float = 0.0,
    started_at: float = T0,
    queue_depth=(),
    sweep_id: str = "s1",
    params: dict | None = None,
    workload: str = "throughput",
) -> None:
    """One run: tasks are (task_id, sent_at, started_at, finished_at, state); samples are
    (host, pid, role, ts, rss, pss); connections are (role, kind, ts, count); queue_depth (ts, depth).
    The runs are throughput stream runs unless ``params`` says otherwise (their latency is one a caller
    feels, so the report shows it)."""
    db.record_run_start(
        con,
        experiment=experiment,
        sweep_id=sweep_id,
        run_id=run_id,
        cell_id=cell_id(dims),
        repeat=repeat,
        workload=workload,
        dims=dims,
        params=params or {"mode": "stream"},
        warmup_s=warmup_s,
    )
    # record_run_start stamps now(); tests need a known start for seconds-since-start.
    con.execute("UPDATE run_starts SET started_at = to_timestamp(?) WHERE run_id = ?", [started_at, run_id])
    db.record_run_end(con, run_id, status, None if status == "ok" else "boom", {})
    for t in tasks:
        tid, sent, start, fin, state = t
        con.execute(
            "INSERT INTO tasks (run_id, task_id, name, host, pid, sent_at, received_at, started_at,"
            " finished_at, state, redelivered) VALUES (?, ?, 'noop', 'w1', 1, ?, ?, ?, ?, ?, false)",
            [run_id, tid, sent, start, start, fin, state],
        )
    for host, pid, role, ts, rss, pss in samples:
        con.execute("INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, 1.0)", [run_id, host, pid, role, ts, rss, pss])
    for role, kind, ts, count in connections:
        con.execute(
            "INSERT INTO connections (run_id, host, role, kind, ts, count) VALUES (?, 'b1', ?, ?, ?, ?)",
            [run_id, role, kind, ts, count],
        )
    for ts, depth in queue_depth:
        con.execute("INSERT INTO queue_depth (run_id, ts, depth) VALUES (?, ?, ?)", [run_id, ts, depth])
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
                        tasks = [
                            (f"t{i}", T0 + 1 + i, T0 + 1 + i, T0 + 1 + i + (i + 1) / 10, "SUCCESS") for i in range(10)
                        ]
                        samples = [("w1", 10, "worker", T0 + k, 100 * conc + k, 50 * conc + k) for k in (2, 3, 4)]
                        samples += [("w1", 11, "worker-child", T0 + k, 10, 5) for k in (2, 3, 4)]
                        add_run(
                            con,
                            experiment,
                            run_id,
                            dims,
                            repeat=repeat,
                            tasks=tasks,
                            samples=samples,
                            connections=[("broker", broker, T0 + 2, 2), ("broker", broker, T0 + 3, 2 + conc)],
                            queue_depth=[(T0 + 1 + k, 10 - k) for k in range(11)],
                            metrics={
                                "tasks_published": 10,
                                "tasks_completed": 10,
                                "tasks_lost": 0,
                                "tasks_duplicated": 0,
                                "consume_rate": rate,
                                "publish_rate": 2 * rate,
                                "makespan_s": 10_000 / rate,
                                "latency_p50_s": 0.55,
                                "latency_p95_s": 0.955,
                                "latency_p99_s": 0.991,
                                "peak_rss_bytes": 100 * conc + 4 + 10,
                                "peak_pss_bytes": 50 * conc + 4 + 5,
                                "broker_connections_max": 2 + conc,
                            },
                        )
        add_run(
            con,
            experiment,
            "redis-prefork-1-3",
            {"broker": "redis", "backend": "none", "pool": "prefork", "concurrency": 1},
            repeat=3,
            status="failed",
            metrics={"tasks_published": 10, "tasks_completed": 8, "tasks_lost": 2, "consume_rate": 1.0},
        )
    return path


GRID_BROKERS, GRID_POOLS = ("redis", "rabbitmq"), ("prefork", "threads", "gevent", "eventlet", "solo")
GRID_CONCURRENCY = tuple(2**k for k in range(10))  # 1 … 512: ten values, as many as the palette holds


def grid_rate(broker: str, pool: str, concurrency: int) -> float:
    """A known best cell: rabbitmq / threads / 64 (rate peaks at 64 and falls on either side)."""
    peak = 6 - abs(GRID_CONCURRENCY.index(concurrency) - 6)
    return 1000 + 200 * (broker == "rabbitmq") + 100 * GRID_POOLS[::-1].index(pool) * (pool != "solo") + 300 * peak


def build_grid(
    path: Path,
    experiment: str = "grid",
    repeats: int = 3,
    tasks_per_run: int = 20,
    pools: tuple[str, ...] = GRID_POOLS,
    concurrency: tuple[int, ...] = GRID_CONCURRENCY,
) -> Path:
    """broker 2 × pool 5 × concurrency 10 = 100 cells (or ``pools`` × ``concurrency``, a subset of
    those) × ``repeats`` ok runs, each with
    ``tasks_per_run`` tasks, worker samples, broker connections, queue depth and the headline
    metrics: every chart of the report has data. Rows are inserted in bulk (a million task rows
    take seconds); runs through :func:`add_run`."""
    runs = []  # (run_id, broker, concurrency, repeat, consume rate)
    with db.connect(path) as con:
        con.execute("BEGIN")  # one commit, not a few per run
        for broker in GRID_BROKERS:
            for pool in pools:
                for conc in concurrency:
                    dims = {"broker": broker, "backend": "none", "pool": pool, "concurrency": conc}
                    for repeat in range(1, repeats + 1):
                        run_id = f"{broker}-{pool}-{conc}-{repeat}"
                        add_run(con, experiment, run_id, dims, repeat=repeat)
                        runs.append((run_id, broker, conc, repeat, grid_rate(broker, pool, conc) + repeat))
        ids, brokers, concs, reps, rates = (list(col) for col in zip(*runs))
        con.execute(
            "CREATE TEMP TABLE grid AS SELECT unnest(?) AS run_id, unnest(?) AS broker, unnest(?) AS conc, "
            "unnest(?) AS rep, unnest(?) AS rate",
            [ids, brokers, concs, reps, rates],
        )
        metrics = {
            "tasks_published": f"{tasks_per_run}",
            "tasks_completed": f"{tasks_per_run}",
            "tasks_lost": "0",
            "consume_rate": "rate",
            "makespan_s": f"{tasks_per_run} / rate",
            "latency_p50_s": "0.001 * conc + rep / 1e4",
            "latency_p99_s": "0.004 * conc + rep / 1e4",
            "peak_rss_bytes": "1048576 * (40 + conc)",
            "peak_pss_bytes": "1048576 * (20 + conc)",
            "broker_connections_max": "2 + conc",
        }
        for name, value in metrics.items():
            con.execute(f"INSERT INTO metrics SELECT run_id, '{name}', {value}, '' FROM grid")
        con.execute(f"""INSERT INTO tasks (run_id, task_id, name, host, pid, sent_at, received_at, started_at,
                            finished_at, state, redelivered)
                        SELECT run_id, 't' || g, 'noop', 'w1', 1, {T0 + 1} + g * 0.001, {T0 + 1} + g * 0.001,
                               {T0 + 1} + g * 0.001, {T0 + 1} + g * 0.001 + 0.0005 * conc * (1 + g % 10),
                               'SUCCESS', false
                        FROM grid, range({tasks_per_run}) AS s(g)""")
        con.execute(f"""INSERT INTO samples SELECT run_id, 'w1', p, CASE WHEN p = 10 THEN 'worker' ELSE 'worker-child'
                            END, {T0} + k * 0.5, 1e7 * (p + k % 3), 5e6 * (p + k % 3), 1.0
                        FROM grid, range(8) AS a(k), range(10, 12) AS b(p)""")
        con.execute(f"""INSERT INTO connections (run_id, host, role, kind, ts, count)
                        SELECT run_id, 'b1', 'broker', broker, {T0} + 2 + k, 2 + k * conc
                        FROM grid, range(2) AS a(k)""")
        con.execute(
            f"INSERT INTO queue_depth (run_id, ts, depth) SELECT run_id, {T0 + 1} + k, 10 - k "
            "FROM grid, range(11) AS a(k)"
        )
        con.execute("COMMIT")
    return path


#: The cell of :func:`history`'s nights, and its runs' spread: three runs a night, a few % apart.
HISTORY_CELL = {"broker": "redis", "backend": "none", "pool": "threads", "concurrency": 4}
HISTORY_JITTER = (-0.012, 0.0, 0.015)


def history(
    path, nights: list[float], *, cells=(HISTORY_CELL,), tags=None, experiment="e", resumed: dict | None = None
):
    """One sweep per night (started an hour apart), 3 ok runs a cell of a backlog (its headline has no
    latency), consume_rate = level × (1 + jitter)."""
    with db.connect(path) as con:
        for night, level in enumerate(nights, 1):
            sweep = f"s{night:03d}"
            db.record_sweep(
                con,
                sweep,
                experiment,
                "e.yaml",
                "throughput",
                "",
                "inv",
                {},
                {"revision": 1},
                tags=(tags or {}).get(night, {"night": str(night)}),
                planned=3 * len(cells),
            )
            con.execute(
                "UPDATE sweeps SET started_at = to_timestamp(?) WHERE sweep_id = ?",
                [1_700_000_000 + 3600 * night, sweep],
            )
            for c, dims in enumerate(cells):
                for repeat, jitter in enumerate(HISTORY_JITTER, 1):
                    rate = level * (1 + jitter) * (1 + c)
                    add_run(
                        con,
                        experiment,
                        f"r{night}-{c}-{repeat}",
                        dims,
                        repeat=repeat,
                        sweep_id=sweep,
                        started_at=1_700_000_000 + 3600 * night + repeat,
                        params={"mode": "backlog"},
                        metrics={"consume_rate": rate, "latency_p99_s": 1000 / rate},
                    )
    return path


def nightly(
    path,
    nights: list[dict[str, float]],
    *,
    runs: int = 3,
    spread: float = 0.02,
    seed: int = 1,
    workload: str = "throughput",
    definition: dict | None = None,
    experiment: str = "e",
):
    """One sweep a night of one cell (HISTORY_CELL), ``runs`` ok runs each; night k's runs carry each
    metric of ``nights[k]`` at that level × (1 + N(0, spread)) (seeded): histories whose true
    changes a test knows."""
    import numpy as np

    rng = np.random.default_rng(seed)
    with db.connect(path) as con:
        for night, levels in enumerate(nights, 1):
            sweep = f"s{night:03d}"
            db.record_sweep(
                con,
                sweep,
                experiment,
                "e.yaml",
                workload,
                "",
                "inv",
                definition or {},
                {"revision": 1},
                tags={"night": str(night)},
                planned=runs,
            )
            con.execute(
                "UPDATE sweeps SET started_at = to_timestamp(?) WHERE sweep_id = ?",
                [1_700_000_000 + 3600 * night, sweep],
            )
            for repeat in range(1, runs + 1):
                run_id = f"r{night}-{repeat}"
                add_run(
                    con,
                    experiment,
                    run_id,
                    HISTORY_CELL,
                    repeat=repeat,
                    sweep_id=sweep,
                    started_at=1_700_000_000 + 3600 * night + repeat,
                    metrics={m: v * (1 + rng.normal(0, spread)) for m, v in levels.items()},
                    workload=workload,
                )
    return path

"""Summarise a captured profile per task name (DuckDB reads the Parquet)."""

from __future__ import annotations

from pathlib import Path

from cmx.engine.errors import InputError

_SUMMARY = """
SELECT name, any_value(coalesce(queue, routing_key)) AS queue, count(*) AS tasks,
       (count(*) - 1) / nullif(max({arrival}) - min({arrival}), 0) AS rate_per_s,
       quantile_cont(runtime, 0.5) AS runtime_p50, quantile_cont(runtime, 0.95) AS runtime_p95,
       quantile_cont(runtime, 0.99) AS runtime_p99,
       avg(args_bytes + coalesce(kwargs_bytes, 0)) AS payload_bytes,
       avg((retries > 0)::INT) AS retry_share, avg((failed IS NOT NULL)::INT) AS failed_share,
       count(*) FILTER (WHERE parent_id IS NOT NULL) AS with_parent,
       string_agg(DISTINCT {source}, '+' ORDER BY {source}) AS arrival_source
FROM read_parquet(?) GROUP BY name ORDER BY tasks DESC, name
"""
_PEAK = """
SELECT name, max(n) AS peak_per_s FROM (
  SELECT name, floor({arrival}) AS s, count(*) AS n FROM read_parquet(?) GROUP BY ALL)
GROUP BY name
"""


def summary(path: Path) -> list[dict]:
    """One dict per task name: count, mean and peak arrival rate, runtime p50/p95/p99 (seconds), payload, retries, and
    where its arrival times come from (``sent``, ``received`` or both joined by ``+``: docs/replay.md)."""
    import duckdb

    from cmx.workloads.catalog.replay_plan import arrival_sql

    if not Path(path).is_file():
        raise InputError(f"{path}: no such profile (write one with cmx capture --out)")
    con = duckdb.connect()
    try:
        arrival, source = arrival_sql(con, str(path))
        cur = con.execute(_SUMMARY.format(arrival=arrival, source=source), [str(path)])
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
        peaks = dict(con.execute(_PEAK.format(arrival=arrival), [str(path)]).fetchall())
    except duckdb.Error as exc:
        raise InputError(f"{path}: not a cmx profile ({str(exc).splitlines()[0]})") from None
    order = (
        "name",
        "queue",
        "tasks",
        "rate_per_s",
        "peak_per_s",
        "runtime_p50",
        "runtime_p95",
        "runtime_p99",
        "payload_bytes",
        "retry_share",
        "failed_share",
        "with_parent",
        "arrival_source",
    )
    return [{k: (peaks.get(r["name"]) if k == "peak_per_s" else r[k]) for k in order} for r in rows]


def canvas_kinds(path: Path) -> dict[str, int]:
    """How many chords, chains (a task with the tasks it spawned) and single tasks the replay
    workload reads in the profile (workloads/catalog/replay_plan.py infers them)."""
    from cmx.workloads.catalog.replay_plan import exact, read_rows

    try:
        units = exact(read_rows(Path(path)))
    except ValueError as exc:
        raise InputError(str(exc)) from None
    kinds = {"chord": 0, "chain": 0, "single": 0}
    for unit in units:
        kind = "chord" if unit.body else ("chain" if unit.count() > 1 else "single")
        kinds[kind] += 1
    return kinds

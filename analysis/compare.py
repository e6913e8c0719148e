"""``cmx compare``: headline metrics of two selections of runs side by side (statistics only;
formatting is in :mod:`analysis.compare_format`), as Rally's ``esrally compare`` does.

A selection is an experiment name, optionally filtered by dimension values:
``quickstart:broker=redis,pool=gevent``. Each figure is the median over the selection's ok runs.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.db import RUN_COLUMNS

HEADLINE = ("tasks_published", "tasks_completed", "tasks_lost", "tasks_duplicated", "publish_rate", "consume_rate",
            "makespan_s", "latency_p50_s", "latency_p95_s", "latency_p99_s", "peak_rss_bytes", "peak_pss_bytes",
            "broker_connections_max", "backend_connections_max")


def better_direction(metric: str) -> str | None:
    """'higher', 'lower', or None when neither is better (counts of published tasks, connections)."""
    if metric.endswith("_rate"):
        return "higher"
    if metric.startswith(("latency_", "peak_")) or metric in ("makespan_s", "tasks_lost", "tasks_duplicated"):
        return "lower"
    return None


@dataclass(frozen=True)
class Selection:
    experiment: str
    filters: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.experiment + (":" + ",".join(f"{k}={v}" for k, v in self.filters) if self.filters else "")


def parse_selection(text: str) -> Selection:
    """``EXPERIMENT[:DIM=VALUE,DIM=VALUE…]`` → :class:`Selection`; raises ValueError when malformed.
    ``tag.KEY=VALUE`` selects the runs of sweeps run with ``--tag KEY=VALUE``."""
    name, _, rest = text.partition(":")
    if not name:
        raise ValueError(f"{text!r}: expected EXPERIMENT or EXPERIMENT:DIM=VALUE,…")
    filters = []
    for part in filter(None, rest.split(",")):
        dim, eq, value = part.partition("=")
        if not eq or not dim:
            raise ValueError(f"{text!r}: {part!r} is not DIM=VALUE")
        filters.append((dim.strip(), value.strip()))
    return Selection(name, tuple(filters))


@dataclass(frozen=True)
class MetricDiff:
    metric: str
    baseline: float | None
    contender: float | None
    baseline_runs: int
    contender_runs: int
    better: str | None          # 'higher' | 'lower' | None

    @property
    def diff(self) -> float | None:
        return None if self.baseline is None or self.contender is None else self.contender - self.baseline

    @property
    def diff_pct(self) -> float | None:
        if self.diff is None or not self.baseline:
            return None
        return 100.0 * self.diff / abs(self.baseline)

    @property
    def verdict(self) -> str | None:
        """'better' or 'worse' for the contender, 'same' when equal, None when there is no direction."""
        if self.better is None or self.diff is None:
            return None
        if self.diff == 0:
            return "same"
        return "better" if (self.diff > 0) == (self.better == "higher") else "worse"


def _medians(con, sel: Selection) -> tuple[dict[str, tuple[float, int]], int]:
    cols = dict(con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'runs'").fetchall())
    where, params = ["r.experiment = ?", "r.status = 'ok'"], [sel.experiment]
    for dim, value in sel.filters:
        if dim.startswith("tag."):  # runs of sweeps run with --tag KEY=VALUE
            from engine.db import tagged_runs_sql

            cond, tag_params = tagged_runs_sql(con, {dim[len("tag."):]: value})
            where.append(cond)
            params.extend(tag_params)
            continue
        if dim not in cols or dim in RUN_COLUMNS:
            raise ValueError(f"{sel}: {dim!r} is not a dimension of any run")
        column = f'r."{dim.replace(chr(34), chr(34) * 2)}"'
        if cols[dim] in ("DOUBLE", "BIGINT"):
            # Numbers compare as numbers: heartbeat=0 matches the stored 0.0, size_mb=2 matches 2.0.
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"{sel}: {dim} is a number, got {value!r}") from None
            where.append(f"{column} = ?")
            params.append(number)
        elif cols[dim] == "BOOLEAN":
            where.append(f"CAST({column} AS VARCHAR) = lower(?)")  # true, True, TRUE
            params.append(value)
        else:
            where.append(f"CAST({column} AS VARCHAR) = ?")
            params.append(value)
    cond = " AND ".join(where)
    runs = con.execute(f"SELECT count(*) FROM runs r WHERE {cond}", params).fetchone()[0]
    rows = con.execute(f"""
        SELECT m.name, median(m.value), count(m.value) FROM runs r JOIN metrics m USING (run_id)
        WHERE {cond} AND m.name IN (SELECT unnest(?::VARCHAR[])) GROUP BY m.name""",
                       [*params, list(HEADLINE)]).fetchall()
    return {name: (median, n) for name, median, n in rows}, runs


def compare(con, baseline: Selection, contender: Selection) -> list[MetricDiff]:
    """One :class:`MetricDiff` per headline metric either side has; ValueError when a side has no ok run."""
    base, base_runs = _medians(con, baseline)
    cont, cont_runs = _medians(con, contender)
    for sel, n in ((baseline, base_runs), (contender, cont_runs)):
        if not n:
            raise ValueError(f"{sel}: no ok runs match")
    return [MetricDiff(m, base.get(m, (None, 0))[0], cont.get(m, (None, 0))[0], base.get(m, (None, 0))[1],
                       cont.get(m, (None, 0))[1], better_direction(m))
            for m in HEADLINE if m in base or m in cont]

"""``cmx compare``: two selections of runs, like for like (data access; the statistics are in
:mod:`cmx.analysis.stats`, the formatting in :mod:`cmx.analysis.compare_format`).

A selection is an experiment name, optionally filtered by dimension values:
``quickstart:broker=redis,pool=gevent``. Each side must resolve to exactly one cell (and one
experiment revision, where the database records revisions): a median over a mixture of
configurations is not a figure of any of them. ``pool_cells=True`` is the explicit opt-in to
pool a multi-cell selection; the result then says what was pooled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cmx.analysis import fingerprint, headline, noise, stats
from cmx.analysis.views import dimension_columns, experiment_hint
from cmx.engine.errors import suggest
from cmx.engine.results import metricdefs

#: A column of ``runs`` that is no dimension but separates definitions of one experiment (i9a adds it).
REVISION = "revision"


class SelectionError(ValueError):
    """A selection that matches nothing, or a mixture of cells (exit 2)."""


@dataclass(frozen=True)
class Selection:
    experiment: str
    filters: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.experiment + (":" + ",".join(f"{k}={v}" for k, v in self.filters) if self.filters else "")


def parse_only(experiment: str, only: str) -> Selection:
    """``--only DIM=VALUE,…`` (all must match; ``tag.KEY=VALUE`` for sweeps run with that tag) of
    ``cmx trend`` and ``cmx recommend`` → a :class:`Selection` of ``experiment``; SelectionError when malformed."""
    filters = []
    for part in filter(None, only.split(",")):
        dim, eq, value = part.partition("=")
        if not eq or not dim.strip():
            raise SelectionError(f"--only {only!r}: {part!r} is not DIM=VALUE")
        filters.append((dim.strip(), value.strip()))
    return Selection(experiment, tuple(filters))


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


def with_tags(sel: Selection, tags: dict[str, str]) -> Selection:
    """``sel`` narrowed to the runs of sweeps that carry every one of ``tags`` (``--tag``)."""
    return Selection(sel.experiment, sel.filters + tuple((f"tag.{k}", v) for k, v in tags.items()))


@dataclass(frozen=True)
class Side:
    """What one selection resolved to: its ok runs and, when pooled, the dimensions that vary."""

    selection: Selection
    run_ids: tuple[str, ...]
    cells: int
    differing: dict[str, list[str]] = field(default_factory=dict)  # dimension → its distinct values

    def pooled_note(self) -> str:
        """What --pool-cells pooled on this side ('' when it is one cell of one revision)."""
        if self.cells <= 1 and not self.differing:
            return ""
        return f"{self.selection} pools {self.cells} cells: {describe(self.differing)}"


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    better: str  # higher | lower | neither
    result: stats.Comparison


@dataclass(frozen=True)
class CompareResult:
    baseline: Side
    contender: Side
    metrics: list[MetricComparison]
    # fingerprint facts that differ, runs not sampled (on stderr, as pyperf warns); pooling: said by each Side
    warnings: list[str]
    #: How the hosts' noise differs between the sides (cmx.analysis.noise.differs), None when alike or unknown.
    noise: str | None = None

    @property
    def notes(self) -> list[str]:
        return [n for n in (self.baseline.pooled_note(), self.contender.pooled_note()) if n]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _columns(con) -> dict[str, str]:
    """What a selection can filter on (name → SQL type): the dimensions, then the revision where recorded."""
    revision = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'runs' AND column_name = ?", [REVISION]
    ).fetchall()
    return {**dimension_columns(con), **dict(revision)}


def _where(con, cols: dict[str, str], sel: Selection) -> tuple[str, list]:
    where, params = ["r.experiment = ?", "r.status = 'ok'"], [sel.experiment]
    for dim, value in sel.filters:
        if dim.startswith("tag."):  # runs of sweeps run with --tag KEY=VALUE
            from cmx.engine.results.db import tagged_runs_sql

            cond, tag_params = tagged_runs_sql(con, {dim[len("tag.") :]: value})
            where.append(cond.replace("run_id IN", "r.run_id IN", 1))
            params.extend(tag_params)
            continue
        if dim not in cols:
            raise SelectionError(f"{sel}: {dim!r} is not a dimension of any run")
        column = f"r.{_q(dim)}"
        if cols[dim] in ("DOUBLE", "BIGINT", "INTEGER"):
            # Numbers compare as numbers: heartbeat=0 matches the stored 0.0, size_mb=2 matches 2.0.
            try:
                number = float(value)
            except ValueError:
                raise SelectionError(f"{sel}: {dim} is a number, got {value!r}") from None
            where.append(f"{column} = ?")
            params.append(number)
        elif cols[dim] == "BOOLEAN":
            where.append(f"CAST({column} AS VARCHAR) = lower(?)")  # true, True, TRUE
            params.append(value)
        else:
            where.append(f"CAST({column} AS VARCHAR) = ?")
            params.append(value)
    return " AND ".join(where), params


def selection_where(con, sel: Selection) -> tuple[str, list]:
    """The SQL condition (on ``runs r``) and its parameters for the ok runs ``sel`` selects."""
    return _where(con, _columns(con), sel)


def describe(differing: dict[str, list[str]]) -> str:
    """``pool in {prefork, threads}, concurrency in {1, 4}``"""
    return ", ".join(f"{d} in {{{', '.join(v)}}}" for d, v in differing.items())


def _show(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "(unset)" if value is None else str(value)


def _differing(con, cols: dict[str, str], cond: str, params: list) -> dict[str, list[str]]:
    """The dimensions (and revision) whose values differ among the runs ``cond`` selects, each with
    its distinct values; a dimension no run sets is one value, unset, and differs from nothing."""
    if not cols:
        return {}
    names = list(cols)  # the view's order (built-ins first), then the revision
    exprs = ", ".join(f"list(DISTINCT r.{_q(c)}) FILTER (WHERE r.{_q(c)} IS NOT NULL)" for c in names)
    nulls = ", ".join(f"bool_or(r.{_q(c)} IS NULL)" for c in names)
    row = con.execute(f"SELECT {exprs}, {nulls} FROM runs r WHERE {cond}", params).fetchone()
    differing: dict[str, list[str]] = {}
    for i, c in enumerate(names):
        values = sorted(row[i] or [], key=lambda v: (isinstance(v, str), v))
        shown = [_show(v) for v in values] + (["(unset)"] if row[len(names) + i] else [])
        if len(shown) > 1:
            differing[c] = shown
    return differing


def _working_selector(con, cols: dict[str, str], sel: Selection, differing: dict[str, list[str]]) -> str | None:
    """A selection that narrows ``sel`` to one cell of one revision (the first such, by cell), or
    None when none can be written (a cell differs from another only where it is unset)."""
    dims = [d for d in differing if not d.startswith("tag.")]
    if not dims:
        return None
    cond, params = _where(con, cols, sel)
    picks = ", ".join(f"any_value(r.{_q(d)})" for d in dims)
    rows = con.execute(
        f"SELECT {picks} FROM runs r WHERE {cond} GROUP BY r.cell_id, "
        + ", ".join(f"r.{_q(d)}" for d in dims)
        + " ORDER BY ALL",
        params,
    ).fetchall()
    for row in rows:
        named = tuple((d, _show(v)) for d, v in zip(dims, row) if v is not None)
        if not named:
            continue
        narrower = Selection(sel.experiment, sel.filters + named)
        ncond, nparams = _where(con, cols, narrower)
        cells = con.execute(f"SELECT count(DISTINCT cell_id) FROM runs r WHERE {ncond}", nparams).fetchone()[0]
        if cells == 1 and not _differing(con, cols, ncond, nparams):
            return str(narrower)
    return None


def resolve(con, sel: Selection, role: str, pool_cells: bool = False) -> Side:
    """The selection's ok runs; SelectionError unless they form one cell and one revision (or ``pool_cells``).
    The error names a selection that does select one cell, where one can be written."""
    cols = _columns(con)
    cond, params = _where(con, cols, sel)
    rows = con.execute(f"SELECT run_id, cell_id FROM runs r WHERE {cond}", params).fetchall()
    if not rows:
        raise SelectionError(f"{role} {sel}: no ok runs match" + experiment_hint(con, sel.experiment))
    cells = len({c for _, c in rows})
    differing = _differing(con, cols, cond, params)
    if (cells > 1 or differing) and not pool_cells:
        what = f"{cells} cells" if cells > 1 else "runs of more than one revision"
        example = _working_selector(con, cols, sel, differing)
        fix = f"name one, e.g. {example}," if example else f"add {next(iter(differing), 'DIM')}=...,"
        varies = describe(differing) or "cells whose dimensions differ"
        raise SelectionError(f"{role} selects {what}: {varies}; {fix} or pass --pool-cells")
    return Side(sel, tuple(r for r, _ in rows), cells, differing)


def _values(con, run_ids: tuple[str, ...]) -> dict[str, list[float]]:
    got: dict[str, list[float]] = {}
    for name, value in con.execute(
        "SELECT name, value FROM metrics WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND value IS NOT NULL "
        "ORDER BY run_id",
        [list(run_ids)],
    ).fetchall():
        got.setdefault(name, []).append(value)
    return got


def _metric_names(con, sides: list[Side], present: set[str]) -> list[str]:
    """Every declared metric either side has (in the registry's order), then the workload's own headline ones."""
    names = [m for m in metricdefs.METRICS if m in present]
    own = headline.of_runs(con, [r for s in sides for r in s.run_ids])
    return names + [m for m in own if m in present and m not in names]


def host_warnings(con, base: Side, cont: Side) -> list[str]:
    """One line per fact of the environment fingerprint (:mod:`cmx.analysis.fingerprint`: package
    versions, servers, kernel, CPU…) whose values differ between the two sides' runs, unless the
    sides chose the difference (another ``broker``: another broker server)."""
    per_run = fingerprint.of_runs(con, [*base.run_ids, *cont.run_ids])
    a, b = fingerprint.merged(per_run, base.run_ids), fingerprint.merged(per_run, cont.run_ids)
    skip = fingerprint.chosen(con, base.run_ids, cont.run_ids)
    return [
        f"hosts differ: {fact} is {fingerprint.shown(x)} in the baseline but {fingerprint.shown(y)} in the contender"
        for fact, x, y in fingerprint.differences(a, b, skip)
    ]


def not_sampled(con, side: Side, role: str) -> list[str]:
    """One line per metric some of the side's runs have no value of (a peak PSS with no reading
    inside the run): those runs are left out of it, and n says so; this says why."""
    rows = con.execute(
        "SELECT name, count(*) FROM metrics WHERE run_id IN (SELECT unnest(?::VARCHAR[])) "
        "AND value IS NULL AND name LIKE 'peak_pss%' GROUP BY name ORDER BY name",
        [list(side.run_ids)],
    ).fetchall()
    return [
        f"{name}: not sampled in {k} of the {role}'s {len(side.run_ids)} run(s) (left out of its n)" for name, k in rows
    ]


def compare(
    con,
    baseline: Selection,
    contender: Selection,
    pool_cells: bool = False,
    margin_pct: float = stats.MARGIN_PCT,
    metrics: tuple[str, ...] = (),
    every: bool = False,
) -> CompareResult:
    """Per metric: n, median and interval per side, change %, p-value, verdict under
    :mod:`cmx.analysis.stats`' rule with an equivalence margin of ``margin_pct``. The metrics: only
    ``metrics`` when given, every one either side has with ``every``, else the objective and the
    headline the sides' runs stored (every one, for runs stored without a headline)."""
    base = resolve(con, baseline, "baseline", pool_cells)
    cont = resolve(con, contender, "contender", pool_cells)
    a, b = _values(con, base.run_ids), _values(con, cont.run_ids)
    rows = []
    names = _metric_names(con, [base, cont], set(a) | set(b))
    missing = [m for m in metrics if m not in names]
    if missing:
        raise SelectionError(
            f"--metric {missing[0]}: neither side has it (they have: {', '.join(names)})" + suggest(missing[0], names)
        )
    if metrics:
        names = [m for m in names if m in metrics]
    elif not every:
        chosen = [m for m in headline.chosen_for_runs(con, [*base.run_ids, *cont.run_ids]) if m in names]
        names = chosen or names
    for name in names:
        better = metricdefs.get(name).better.value
        rows.append(
            MetricComparison(
                name, better, stats.compare_samples(a.get(name, []), b.get(name, []), better, margin_pct=margin_pct)
            )
        )
    warnings = host_warnings(con, base, cont) + not_sampled(con, base, "baseline") + not_sampled(con, cont, "contender")
    label = noise.differs(con, base.run_ids, cont.run_ids, sides=("in the baseline", "in the contender"))
    if label:
        warnings.append(f"noise differs: {label}: a change may be the host's, not the configuration's")
    return CompareResult(base, cont, rows, warnings, label)

"""``cmx report``: an offline HTML report of one experiment, plus a PNG and a Vega-Lite JSON per chart.

Every figure comes from the SQL views (``analysis/sql``) aggregated in DuckDB: the charts receive
a few rows per cell or per sampler tick, never raw task rows, so a report over millions of tasks
takes seconds. Which charts appear depends on the data: a chart whose data is empty is left out.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import vl_convert

from cmx.analysis.charts import validated_once
from cmx.analysis.pngs import Painter
from cmx.analysis.report_cells import _q, dimensions, table_metrics  # noqa: F401 (the report's API)
from cmx.analysis.report_charts import CHARTED, Chart, build_charts  # noqa: F401 (the report's API)
from cmx.analysis.views import (
    choose_revision,
    dimension_columns,
    experiment_hint,
    restrict_to_tags,  # noqa: F401
    revisions,
    tags_text,
)
from cmx.engine.paths import user_cache
from cmx.workloads.vocab import metrics as M


@dataclass(frozen=True)
class Report:
    experiment: str
    out_dir: Path
    html: Path
    charts: tuple[str, ...]
    cells: int
    runs: int
    revision: int = 1


@lru_cache(maxsize=1)
def _javascript() -> str:
    # Vega, Vega-Lite and Vega-Embed in one script, so the page needs no network. Only "</script"
    # is escaped (it would close the inline script; "<\/script" means the same in strings and regexes).
    # Bundling takes ~3 s of CPU and gives the same text for a vl-convert version: kept in the
    # user's cache dir (benchmarks/scale.py: it was a third of `cmx report`'s time).
    cache = user_cache(f"vega-bundle-{vl_convert.__version__}.js")
    try:
        return cache.read_text()
    except OSError:
        pass
    text = re.sub(r"</(script)", r"<\\/\1", vl_convert.javascript_bundle(), flags=re.IGNORECASE)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(cache)  # atomic: a concurrent report reads the whole bundle or none
    except OSError:
        pass  # no cache, still a report
    return text


def write_report(
    con,
    experiment: str,
    out_dir: Path,
    revision: int | None = None,
    tags: dict[str, str] | None = None,
    painter: Painter | None = None,
    by: str = "sweep",
) -> Report:
    """Write ``index.html`` (self-contained) and ``<chart>.png`` / ``<chart>.vl.json`` into ``out_dir``,
    for one revision of the experiment (default its latest); with ``tags``, of the runs of sweeps
    that carry every one of them only (``cmx report --tag``; this connection's ``runs`` is narrowed).
    The PNGs are drawn by ``painter`` (analysis/pngs.py; one of its own when None) as each chart is
    built; the report returns when all are written. ``by``: the history charts' points, one per
    sweep or per value of a tag (``tag.KEY``, as ``cmx trend --by``)."""
    if painter is None:
        with Painter() as own:
            return write_report(con, experiment, out_dir, revision, tags, own, by)
    restrict_to_tags(con, tags or {})
    known = revisions(con, experiment)
    if not known and tags:
        raise LookupError(f"experiment {experiment!r} has no runs of sweeps tagged {tags_text(tags)} in this database")
    chosen = choose_revision(known, experiment, revision, experiment_hint(con, experiment) if not known else "")
    out_dir.mkdir(parents=True, exist_ok=True)

    def draw(chart: Chart) -> None:  # each chart's PNG is drawn while the next ones are built
        painter.paint(chart.spec, out_dir / f"{chart.name}.png")

    with validated_once():  # each chart's to_dict() validates it whole
        cells, varying, fixed, found = build_charts(con, experiment, chosen, draw)
        from cmx.analysis.report_history import history_charts  # more than one sweep: each metric's history

        history = history_charts(con, experiment, chosen, cells, varying, table_metrics(con, experiment), by=by)
        for chart in history:
            draw(chart)
        found += history
        answer, tradeoffs = _answer(con, experiment, chosen, cells)
    for chart in tradeoffs:
        draw(chart)
    for chart in [*tradeoffs, *found]:
        (out_dir / f"{chart.name}.vl.json").write_text(json.dumps(chart.spec, indent=1))
    page = _page(con, experiment, chosen, known, tags, cells, varying, fixed, found, answer, tradeoffs, out_dir)
    painter.wait()
    return Report(
        experiment,
        out_dir,
        page,
        tuple(c.name for c in [*tradeoffs, *found]),
        len(cells),
        sum(c["runs"] for c in cells),
        chosen,
    )


def _page(con, experiment, chosen, known, tags, cells, varying, fixed, found, answer, tradeoffs, out_dir) -> Path:
    from cmx.analysis.page import render_html  # the page template, kept apart from the data work

    from cmx.analysis.hostshare import host_shares, shares_html

    page = out_dir / "index.html"
    shares = shares_html(host_shares(con, experiment, chosen), {c["cell_id"]: c["label"] for c in cells})
    page.write_text(
        render_html(
            experiment,
            cells,
            varying,
            fixed,
            found,
            table_metrics(con, experiment),
            _javascript(),
            " ".join(filter(None, (tags_note(tags), revision_note(chosen, known)))),
            shares,
            tuple(pitfall_notes(con, experiment, chosen)),
            answer,
            tradeoffs,
        )
    )
    return page


def _answer(con, experiment: str, revision: int, cells: list[dict]) -> tuple[str, list[Chart]]:
    """The page's opening "Which configuration?": the experiment's objective (or its workload's),
    among the cells that lost no task when that was measured; and its trade-off charts (of the
    report's ``cells``)."""
    from cmx.analysis.recommend import (
        RecommendError,
        default_constraints,
        default_objective,
        parse_constraint,
        recommend,
    )
    from cmx.analysis.recommend_format import answer_html
    from cmx.analysis.tradeoff import tradeoff_charts

    try:
        objective = default_objective(con, experiment, revision)
        declared = default_constraints(con, experiment, revision)  # the objective's where
        lost = con.execute(
            "SELECT count(*) FROM metrics JOIN runs USING (run_id) WHERE experiment = ? AND "
            "revision = ? AND name = 'tasks_lost'",
            [experiment, revision],
        ).fetchone()[0]
        said = any(c.metric == M.TASKS_LOST for c in declared)  # once: the objective's where may say it already
        constraints = declared + ([parse_constraint("tasks_lost == 0")] if lost and not said else [])
        rec = recommend(con, experiment, revision, [objective], constraints)
    except RecommendError as exc:
        return answer_html(None, str(exc)), []
    return answer_html(rec), tradeoff_charts(rec, cells)


def tags_note(tags: dict[str, str] | None) -> str:
    """What the page says about --tag: only when the report was narrowed to tagged sweeps."""
    return f"Only the runs of sweeps tagged {tags_text(tags)} (cmx report --tag)." if tags else ""


def revision_note(chosen: int, known: list[int]) -> str:
    """What the page says about revisions: only when there is more than one."""
    if len(known) < 2:
        return ""
    which = "the latest" if chosen == known[-1] else f"not the latest ({known[-1]})"
    return (
        f"Revision {chosen} of {len(known)}, {which}: the experiment's definition changed between revisions, "
        "so their runs are reported apart (cmx report --revision N for another)."
    )


def pitfall_notes(con, experiment: str, revision: int) -> list[str]:
    """The validate warnings (engine/model/pitfalls.py) for the cells this revision ran, from the
    dimension values stored with its runs."""
    from types import SimpleNamespace

    from cmx.engine.model.pitfalls import warnings

    dims = list(dimension_columns(con))
    if not dims:
        return []
    sel = ", ".join(f"any_value({_q(d)})" for d in dims)
    cells = []
    for cell_id, *values in con.execute(
        f"SELECT cell_id, {sel} FROM runs WHERE experiment = ? AND revision = ? GROUP BY cell_id ORDER BY cell_id",
        [experiment, revision],
    ).fetchall():
        cells.append(
            SimpleNamespace(cell_id=cell_id, values={d: _decoded(v) for d, v in zip(dims, values) if v is not None})
        )
    return warnings(cells)


def _decoded(value):
    # Mappings and lists (celery.broker_transport_options, say) are stored as JSON text, and so are
    # the numbers of a column whose values are of mixed types (null and 1: '1').
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value

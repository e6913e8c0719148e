"""What ``cmx run`` says once a sweep's runs are stored: its thresholds checked on its point (stored
in ``threshold_checks``), and, when the experiment has history, that history's statistics computed
as ``cmx trend`` would and the changes at this sweep said that night."""

from __future__ import annotations

from pathlib import Path

from cmx.cli.common import err, out
from cmx.engine.errors import HostError, InputError
from cmx.analysis import views
from cmx.engine.results import db


def check_point_thresholds(exp, cells, sweep, db_path: Path, varying: list[str]) -> int:
    """Check the experiment's thresholds on this sweep's point, store and print them; how many crossed.
    An interrupted sweep is not checked: its point is not complete (the run that resumes it checks)."""
    if not exp.thresholds:
        return 0
    from cmx.analysis.thresholds import check, render

    with views.connect(db_path) as con:
        checks = check(
            con,
            db.point_sweeps(con, sweep.resumes or sweep.sweep_id),
            [c.cell_id for c in cells],
            dict(exp.thresholds),
            exp.parsed_thresholds(),
        )
        db.record_threshold_checks(con, sweep.sweep_id, [c.row() for c in checks])
    out.print(render(checks, labels_of(cells, varying)))
    return sum(not c.held for c in checks)


def labels_of(cells, varying: list[str]) -> dict[str, str]:
    """Each cell as the summary names it: its varying dimensions (its id when none vary)."""
    from cmx.engine.model.cells import value_text

    return {
        c.cell_id: " ".join(f"{k}={value_text(c.values[k])}" for k in varying if k in c.values) or c.cell_id
        for c in cells
    }


#: Seconds the sweep's end computes its history before it says it is doing so.
HISTORY_NOTICE_S = 1.0


def say_history(experiment: str, revision: int, db_path: Path, labels: dict[str, str]) -> None:
    """A sweep with history before it: compute that history's statistics now, as `cmx trend` would
    (the statistics cache then holds this night's points: the morning's `cmx trend` and the
    report read them back), and say what changed at this sweep, that night. The sweep's runs are
    stored already: a history that cannot be computed is a warning, never the sweep's failure."""
    import threading

    import duckdb

    from cmx.analysis.trend import at_sweep_end, latest_verdicts

    done: dict = {}

    def compute() -> None:
        try:
            with views.connect(db_path, read_only=True) as con:
                done["res"] = at_sweep_end(con, experiment, revision)
        except (InputError, HostError, ValueError, duckdb.Error) as exc:
            done["error"] = exc

    worker = threading.Thread(target=compute, name="history", daemon=True)
    worker.start()
    worker.join(HISTORY_NOTICE_S)
    if worker.is_alive():  # a history no sweep's end computed before (an upgrade of cmx, an imported one)
        out.print(
            f"history: computing the statistics of {experiment}'s history once (later sweeps read them back)…",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        worker.join()
    if "error" in done:
        err.print(
            f"warning: the history of {experiment} was not computed: {done['error']}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return
    res = done.get("res")
    if res is None:
        return
    from cmx.engine.results.metricdefs import HEADLINE

    from cmx.analysis.trend_gate import cell_names, standing

    # the sweep's own labels name the cells by the dimensions that vary; with one cell, by all of its
    names = {c: labels[c] if labels.get(c, c) != c else n for c, n in cell_names(res).items()}
    points = max(len(s.ats) for s in res.series)
    changed = [
        f"{s.metric} of {names.get(s.cell_id, s.cell_id)} {_signed(c.comparison.change_pct, '+.1f')} % "
        f"({c.comparison.verdict}, p {_signed(c.comparison.p_value, '.2g')})"
        for s, c in latest_verdicts(res, (HEADLINE,))
    ]
    others = len(latest_verdicts(res)) - len(changed)
    said = f"changes at this sweep: {'; '.join(changed)}" if changed else "no headline change at this sweep"
    stands = [
        f"{s.metric} of {names.get(s.cell_id, s.cell_id)} since {c.at}"
        for s in res.series
        if s.group == HEADLINE and (c := standing(s)) is not None
    ]
    if stands:
        said += f"; still worse: {'; '.join(stands)}"
    if others:
        said += f" ({others} change(s) of other metrics: not gating)"
    out.print(
        f"history: {points} points of {experiment} (revision {revision}); {said}. `cmx trend {experiment}` shows them.",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _signed(value: float | None, spec: str) -> str:
    return "?" if value is None else format(value, spec)

"""What `cmx validate` says of a valid experiment (issue 43): its cells and runs, how long the
sweep should take, and whether it can show a difference between cells at all.

The time comes from the experiment's own stored runs (their mean, start to end, in the default
results database): `cmx run`'s ETA is reckoned the same way as its runs end (engine/run/progress.py),
and said in the same form. What a sweep can show is the gate's rule (analysis/gate.py): with n runs
a cell the smallest exact two-sided Mann-Whitney p is 2 / C(2n, n), so below
``stats.MIN_N_SHOWN`` runs a cell no difference can be shown, however large. A race's rule
(analysis/racing.py) is a t-test: it can stop a cell from 3 runs a cell, and validate says how much
worse a cell must be for its first and last looks to stop it."""

from __future__ import annotations

from pathlib import Path

from cmx.analysis import gate, stats
from cmx.engine.results import db
from cmx.engine.run.progress import span


def _mean_run_s(db_path: Path, experiment: str) -> tuple[float, int] | None:
    """(mean seconds a stored ok run of ``experiment`` took, how many), or None when none is stored
    (or the database cannot be read now: an estimate is never worth a failure)."""
    if not db_path.is_file():
        return None
    try:
        with db.connect(db_path, read_only=True, wait_s=1.0) as con:
            mean, n = con.execute(
                "SELECT avg(epoch(finished_at) - epoch(started_at)), count(*) FROM runs "
                "WHERE experiment = ? AND status = 'ok' AND finished_at IS NOT NULL",
                [experiment],
            ).fetchone()
    except Exception:  # noqa: BLE001 (locked, another tool's file, a newer cmx's: no estimate)
        return None
    return (float(mean), int(n)) if n else None


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def summary(file: Path, exp, cells, db_path: Path = db.DEFAULT_DB) -> list[str]:
    """The lines `cmx validate` prints on success."""
    runs = len(cells) * exp.max_repeats
    if exp.racing:
        lines = [f"{file}: valid: {_n(len(cells), 'cell')} × {exp.repeats_text()} = at most {_n(runs, 'run')}"]
    else:
        lines = [f"{file}: valid: {_n(len(cells), 'cell')} × {_n(exp.repeats, 'repeat')} = {_n(runs, 'run')}"]
    mean = _mean_run_s(Path(db_path), exp.name)
    if mean:
        lines.append(
            f"time: about {span(runs * mean[0])} ({_n(runs, 'run')} × {mean[0]:.1f} s, the mean of the "
            f"{_n(mean[1], 'stored ok run')} of {exp.name} in {db_path}), plus provisioning"
        )
    else:
        lines.append(
            f"time: no estimate (no stored run of {exp.name} in {db_path}); `cmx run` shows its ETA "
            "once the first run ends"
        )
    said = shows(exp, cells)
    return lines + ([said] if said else [])


def shows(exp, cells) -> str | None:
    """One line: whether the sweep's repeats can show a difference between two of its cells at all
    (None for a single cell: there is nothing to tell apart). `cmx validate` and `cmx run` say it."""
    if len(cells) < 2:
        return None
    if exp.racing:
        return _race_shows(exp.racing, len(cells))
    repeats = exp.repeats
    p = gate.smallest_p(repeats, repeats)
    if gate.can_show(repeats, repeats):
        return (
            f"shows: a difference between two cells can be shown at {_n(repeats, 'run')} a cell (the "
            f"smallest Mann-Whitney p is {p:.2g}, within {stats.ALPHA})"
        )
    # every cell has the same repeats: the fewest a side whose smallest p reaches ALPHA
    return (
        f"shows: no difference between cells can be shown at {_n(repeats, 'run')} a cell (the smallest "
        f"Mann-Whitney p is {p:.2g}); repeats: {stats.MIN_N_SHOWN} would allow it"
    )


#: The run-to-run spread validate states a race's reach at (a coefficient of variation).
SPREAD = 0.05


def _race_shows(r, cells: int) -> str:
    """What a race can decide (analysis/racing.py): its looks, their levels, and the difference its
    first and last looks can stop at a SPREAD run-to-run spread; when its first look cannot decide."""
    from cmx.analysis import racetest, racing

    looks = racing.looks(r.min, r.max)
    if r.max < stats.MIN_N:
        return (
            f"shows: this race can never decide: its rule tests cells with at least {stats.MIN_N} runs, "
            f"above its max of {r.max}; raise max to {stats.MIN_N} or more"
        )
    first, last = max(r.min, stats.MIN_N), r.max
    lines = (
        f"shows: a race from {r.min} to {r.max} runs a cell: a cell stops getting runs once shown worse than the "
        f"best by more than {stats.MARGIN_PCT:g} %; its {looks} look{'s' if looks != 1 else ''} test at "
        f"{racing.level(r.min, r.max, cells, first):.2g}"
        + (f" to {racing.level(r.min, r.max, cells, last):.2g}" if last != first else "")
        + f" (so that a race of {cells} identical cells stops one in at most {racetest.RACE_ERROR * 100:g} % of races)"
    )
    reach = (
        f"; at a {SPREAD * 100:g} % run-to-run spread its first look ({first} runs a cell) stops a cell about "
        f"{_reach(r, cells, first):.0f} % worse"
        + (f", its last ({last}) about {_reach(r, cells, last):.0f} % worse" if last != first else "")
    )
    if r.min < stats.MIN_N:
        return (
            lines + f"; its first look, at {r.min} runs a cell, can never decide (the rule needs {stats.MIN_N} runs "
            f"a cell): min: {stats.MIN_N} would let it" + reach
        )
    return lines + reach


def _reach(r, cells: int, n: int) -> float:
    """How much worse (%) a cell must be, at a SPREAD spread, for the look at ``n`` runs a cell to
    stop it when it is the only one: the pooled t's critical value at that look's level over the
    cells (Hochberg's strictest step)."""
    import math

    from cmx.analysis import racing
    from scipy.stats import t

    level = racing.level(r.min, r.max, cells, n) / max(1, cells - 1)
    d = t.isf(level, cells * (n - 1)) * SPREAD * math.sqrt(2 / n)
    return 100 * -math.expm1(-d)

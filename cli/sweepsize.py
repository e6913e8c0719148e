"""What `cmx validate` says of a valid experiment (issue 43): its cells and runs, how long the
sweep should take, and whether it can show a difference between cells at all.

The time comes from the experiment's own stored runs (their mean, start to end, in the default
results database): `cmx run`'s ETA is reckoned the same way as its runs end (engine/run/progress.py),
and said in the same form. What a sweep can show is the gate's rule (analysis/gate.py): with n runs
a cell the smallest exact two-sided Mann-Whitney p is 2 / C(2n, n), so below
``stats.MIN_N_SHOWN`` runs a cell no difference can be shown, however large."""

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
        from cmx.analysis.racing import looks

        r, level = exp.racing, stats.race_alpha(exp.racing.min, exp.racing.max)
        first = stats.smallest_n_at(level)
        if first > r.max:
            return (
                f"shows: this race can never decide: each of its {looks(r.min, r.max)} looks tests at "
                f"{level:.2g}, which takes {first} runs a cell, above its max of {r.max}; raise max to {first}"
            )
        return (
            f"shows: a race from {r.min} to {r.max} runs a cell: cells shown worse than the best stop getting "
            f"runs; each of its {looks(r.min, r.max)} looks tests at {level:.2g} (so that the race as a whole "
            f"holds {stats.ALPHA}), which can show a difference from {first} runs a cell"
        )
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

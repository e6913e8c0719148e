"""The one rule of a CI gate (``cmx compare --fail-on``, ``cmx trend --fail-on``): what fails it, and
when it cannot fail at all.

``--fail-on worse`` fails on a metric shown worse (beyond the margin: :func:`stats.verdict`);
``--fail-on worse,inconclusive`` also on one neither shown worse nor shown alright (inconclusive, n too
small). Only metrics that may gate are read: a trend's headline group, a comparison's metrics outside
the harness and noise groups (cmx's own cost and the hosts' load never gate). A gate whose sides'
runs are too few for any verdict to be shown (the smallest exact Mann-Whitney p above ALPHA) says
so in one line naming the runs a side would need, whatever it is set to fail on: a gate that cannot
fail must never pass in silence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cmx.analysis import stats

WORSE, INCONCLUSIVE = "worse", "inconclusive"
CHOICES = (WORSE, INCONCLUSIVE)
#: The verdicts ``inconclusive`` fails on: nothing shown either way.
UNDECIDED = (stats.INCONCLUSIVE, stats.N_TOO_SMALL)


def parse(text: str | None) -> frozenset[str]:
    """``worse`` or ``worse,inconclusive`` (any order); ValueError names what is wrong."""
    if text is None:
        return frozenset()
    parts = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in parts if p not in CHOICES]
    if bad or not parts:
        raise ValueError(f"--fail-on {text!r}: expected worse or worse,inconclusive")
    return frozenset(parts)


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided exact Mann-Whitney p of n_a runs against n_b (no ties): 2 / C(n_a + n_b, n_a)."""
    if min(n_a, n_b) < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def can_show(n_a: int, n_b: int) -> bool:
    """Whether any verdict but same can be shown with these runs a side."""
    return min(n_a, n_b) >= stats.MIN_N and smallest_p(n_a, n_b) <= stats.ALPHA


def runs_needed(n_a: int) -> int:
    """The fewest runs the other side needs against ``n_a`` for a difference to be shown at all."""
    n = stats.MIN_N
    while not can_show(max(n_a, stats.MIN_N), n):
        n += 1
    return n


@dataclass(frozen=True)
class Judged:
    """One gating metric's answer: its label, its verdict and the runs either side."""

    label: str
    verdict: str
    n_a: int
    n_b: int


def failures(judged: list[Judged], fail_on: frozenset[str]) -> list[str]:
    """What fails the gate, a verdict at a time: ``worse: a, b`` then ``inconclusive: c``…"""
    fails = ([stats.WORSE] if WORSE in fail_on else []) + (list(UNDECIDED) if INCONCLUSIVE in fail_on else [])
    return [
        f"{verdict}: {', '.join(j.label for j in judged if j.verdict == verdict)}"
        for verdict in fails
        if any(j.verdict == verdict for j in judged)
    ]


def cannot_fail(judged: list[Judged], latest_side: bool) -> str | None:
    """One line when no judged metric could be shown worse with its runs, naming the runs needed: a
    side of a comparison (both sides alike), or the latest point of a trend (against its baseline)."""
    if not judged or any(can_show(j.n_a, j.n_b) for j in judged):
        return None
    j = max(judged, key=lambda j: (j.n_a, j.n_b))
    need = f"{runs_needed(j.n_a)} run(s) at the latest point" if latest_side else f"{stats.MIN_N_SHOWN} ok runs a side"
    return (
        f"no verdict can be shown: {j.n_a} run(s) against {j.n_b} (the smallest Mann-Whitney p is "
        f"{smallest_p(j.n_a, j.n_b):.2g}, above {stats.ALPHA}); {need} would allow one, so this gate cannot fail"
    )

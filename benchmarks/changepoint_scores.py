"""How benchmarks/changepoints.py scores the change points a tool found in a history whose true
changes it made: matched within ±``tolerance`` nights (1 by default; 0: at its night; the nearest
first), the size error of each match, false
changes on the latest night or near a true one, and false changes per 100 nights of A/A histories.
A ramp is one true change matched by any change inside it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BETTER_WORSE = ("better", "worse")


def _mean(values: list[float]) -> float:
    """The mean of the values that are numbers (a change with no change_pct has none); nan if none is."""
    known = [v for v in values if not np.isnan(v)]
    return float(np.mean(known)) if known else float("nan")


@dataclass
class Score:
    true: int = 0
    reported: int = 0
    matched: int = 0
    size_err: list[float] = field(default_factory=list)
    aa_false: int = 0
    aa_nights: int = 0
    bias: list[float] = field(default_factory=list)  # reported − true change %, signed
    false_last: int = 0  # false changes on the latest night
    false_near: int = 0  # false changes 2–3 nights from a true change (not the latest night)

    def add(self, other: Score) -> None:
        self.true += other.true
        self.reported += other.reported
        self.matched += other.matched
        self.size_err += other.size_err
        self.aa_false += other.aa_false
        self.aa_nights += other.aa_nights
        self.bias += other.bias
        self.false_last += other.false_last
        self.false_near += other.false_near

    def cells(self) -> tuple[str, str, str]:
        p = f"{self.matched / self.reported:.2f}" if self.reported else "-"
        r = f"{self.matched / self.true:.2f}" if self.true else "-"
        size = f"{_mean(self.size_err):.1f}" if self.size_err else "-"
        return p, r, size

    def aa(self) -> str:
        return f"{100 * self.aa_false / self.aa_nights:.2f}" if self.aa_nights else "-"


def score(h, found: list[tuple[int, float, str]], tolerance: int = 1) -> Score:
    sc, s = h.scenario, Score()
    reported = sorted(found)
    if sc.ramp:  # one true change, matched by the first change inside the ramp (±1 night)
        lo, hi = sc.ramp[0] - 1, sc.ramp[1] + 1
        inside = [c for c in reported if lo <= c[0] <= hi]
        s.true, s.matched = 1, int(bool(inside))
        s.reported = len(reported) - len(inside) + s.matched
        s.false_last = sum(c[0] == len(h.values) - 1 for c in reported if c not in inside)
        return s
    s.true, s.reported = len(sc.changes), len(reported)
    # Pairs within ±tolerance nights, the nearest first (an exact hit is never taken by a neighbouring change).
    pairs = sorted(
        (abs(c[0] - at), t, j)
        for t, at in enumerate(sc.changes)
        for j, c in enumerate(reported)
        if abs(c[0] - at) <= tolerance
    )
    used_t, used_j = set(), set()
    for _, t, j in pairs:
        if t in used_t or j in used_j:
            continue
        used_t.add(t)
        used_j.add(j)
        s.matched += 1
        pct, true = reported[j][1], sc.true_pct(sc.changes[t])
        s.size_err.append(abs(pct - true) if pct is not None else float("nan"))
        s.bias.append(pct - true if pct is not None else float("nan"))
    last = len(h.values) - 1
    for j, (at, _, _) in enumerate(reported):
        if j not in used_j:
            s.false_last += at == last
            s.false_near += at != last and any(abs(at - c) <= 3 for c in sc.changes)
    if not sc.changes:
        s.aa_false, s.aa_nights = len(reported), len(h.values)
    return s


TOOLS = ("cmx", "cmx b/w", "otava")


def scores(hs: list, key, tools=TOOLS, tolerance: int = 1) -> dict:
    """{group key: {tool: Score}} and the overall under key None; a tool is a key of ``h.found`` ("cmx
    b/w": cmx's changes of verdict better or worse only)."""
    out: dict = {}
    for h in hs:
        for tool in tools:
            source = "cmx" if tool == "cmx b/w" else tool
            if source not in h.found:
                continue
            found = h.found[source]
            if tool == "cmx b/w":
                found = [c for c in found if c[2] in BETTER_WORSE]
            one = score(h, found, tolerance)
            for group in (key(h), None):
                out.setdefault(group, {}).setdefault(tool, Score()).add(one)
    return out

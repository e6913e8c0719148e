"""The race's rule (analysis/racing.py) by simulation: the tables of docs/explanation/statistics.md.

    .venv/bin/python benchmarks/racing.py [RACES]

Seeded races of cells whose runs are normal, spread 5 % of their mean, from ``min`` 3 to ``max``
10 runs a cell, through ``racing.decide_look`` (the rule, vectorised over races; the unit tests
hold it equal to ``racing.decide_samples``). Prints markdown tables: the level of each race, how
often identical cells lose one (a false elimination), how often and after how many runs a cell
10 % better is chosen, how often a cell 2× worse is out at the first look."""

from __future__ import annotations

import sys

import numpy as np

from cmx.analysis import racing

MIN, MAX, SPREAD = 3, 10, 0.05


def races(means, count: int, seed: int, looks: int | None = None):
    """(racing cells at the end [races, cells], the chosen cell or -1, runs a cell when decided)."""
    rng = np.random.default_rng(seed)
    mean = np.asarray(means, float)[None, :, None]
    x = rng.normal(mean, SPREAD * mean, (count, len(means), MAX))
    alive, done = np.ones((count, len(means)), bool), np.zeros(count, bool)
    chosen, at = np.full(count, -1), np.full(count, MAX)
    for n in range(MIN, (MAX if looks is None else MIN + looks - 1) + 1):
        look, _, stopped, same = racing.decide_look(x[:, :, :n], alive, "higher", racing.level(MIN, MAX, len(means), n))
        alive &= ~(stopped & ~done[:, None])
        others = alive.copy()
        others[np.arange(count), look.best] = False
        now = ~done & ~(others & ~same).any(axis=1)
        chosen[now], at[now] = look.best[now], n
        done |= now
    return alive, chosen, at


def main(count: int = 3000) -> None:
    print(f"{count} seeded races a case; runs N(mean, {SPREAD:.0%} × mean); min {MIN}, max {MAX}\n")
    print("| cells | level of the first look (3 runs) | of the last (10) | identical cells: a cell stopped |")
    print("|---|---|---|---|")
    for k in (2, 3, 5, 10, 20):
        alive, _, _ = races([100] * k, count, 60_000 + k)
        first, last = racing.level(MIN, MAX, k, MIN), racing.level(MIN, MAX, k)
        print(f"| {k} | {first:.2g} | {last:.2g} | {np.mean(~alive.all(axis=1)):.1%} |")
    print("\n| cells | one 10 % better: chosen within 10 | wrong | runs a cell (mean) | runs (mean, of fixed 10) |")
    print("|---|---|---|---|---|")
    for k in (2, 5, 10):
        alive, chosen, at = races([110] + [100] * (k - 1), count, 61_000 + k)
        right = chosen == 0
        wrong = np.mean((chosen > 0) | ~alive[:, 0])
        # runs spent: every cell min, then one a round while racing (a stopped cell stops at its look)
        print(
            f"| {k} | {np.mean(right):.1%} | {wrong:.1%} | {at[right].mean():.1f} | "
            f"≤ {k * at[right].mean():.0f} of {k * MAX} |"
        )
    print("\n| cells | one 2× worse: out at the first look (3 runs a cell) |")
    print("|---|---|")
    for k in (2, 5, 10):
        alive, _, _ = races([100] * (k - 1) + [50], count, 62_000 + k, looks=1)
        print(f"| {k} | {np.mean(~alive[:, -1]):.1%} |")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))

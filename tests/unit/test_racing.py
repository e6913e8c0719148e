"""Racing repeats (issue 38): the race's rule (analysis/racing.py) through the real statistics, by
simulation with known answers. Among identical cells a race names a false winner in at most 5 %
of races, despite looking after every round; with a true 10 % difference at 5 % run-to-run
spread it is decided for the better cell within max 10 in at least 90 % of races."""

from __future__ import annotations


import numpy as np
import pytest

from cmx.analysis import racing, stats

RACES = 200
MIN, MAX = 3, 10


def _race(means: list[float], spread: float, seed: int) -> tuple[str | None, int]:
    """One race of cells c0, c1, … whose runs are N(mean, spread × 100): (the winner or None, runs a
    cell at the end)."""
    rng = np.random.default_rng(seed)
    level = stats.race_alpha(MIN, MAX)
    samples = {f"c{i}": list(rng.normal(m, spread * 100, MIN)) for i, m in enumerate(means)}
    out: dict[str, str] = {}
    for n in range(MIN, MAX + 1):
        d = racing.decide_samples(samples, "higher", level, out, resamples=999)
        if d.decided:
            return d.best, n
        out = d.out
        if n == MAX:
            return None, n
        for c in d.contenders:
            samples[c].append(rng.normal(means[int(c[1:])], spread * 100))
    return None, MAX


IDENTICAL = ([100, 100], 0.05, range(RACES))
APART = ([110, 100], 0.05, range(100_000, 100_000 + RACES))


def _races(case: tuple[list[float], float, range]) -> list[tuple[str | None, int]]:
    means, spread, seeds = case
    return [_race(means, spread, seed) for seed in seeds]


@pytest.fixture(scope="module")
def raced() -> dict[str, list[tuple[str | None, int]]]:
    """Both sets of seeded races, once for the module (~28 s of CPU). In this process: a process pool
    forked from the test run inherited kombu's connection pools of earlier tests, and a child's
    after-fork clean-up waited forever on a Redis BRPOP reply (the suite hung here)."""
    return {"identical": _races(IDENTICAL), "apart": _races(APART)}


def test_the_level_of_each_look_spends_alpha_over_the_race():
    one = stats.race_alpha(4, 4)
    assert one == pytest.approx(2 / 70)  # one look at 4 v 4: the smallest exact p, the only one within 0.05
    level = stats.race_alpha(MIN, MAX)
    # stricter than one look, looser than Bonferroni's 0.05 / 8 (the looks are far from independent)
    assert stats.ALPHA / racing.looks(MIN, MAX) < level < stats.ALPHA
    assert stats.race_alpha(3, 20) < level  # more looks, a stricter level


def test_identical_cells_rarely_name_a_winner(raced):
    wins = raced["identical"]
    assert len(wins) == RACES
    false = sum(best is not None for best, _ in wins) / RACES
    print(f"identical cells: a false winner in {false:.1%} of {RACES} races")
    assert false <= 0.05


def test_a_real_difference_is_decided_within_max(raced):
    wins = raced["apart"]
    assert len(wins) == RACES
    decided = sum(best == "c0" for best, _ in wins) / RACES
    wrong = sum(best == "c1" for best, _ in wins) / RACES
    runs = np.mean([n for best, n in wins if best])
    print(
        f"10 % apart at 5 % spread: decided for the better in {decided:.1%} of {RACES} races "
        f"(wrong {wrong:.1%}), at {runs:.1f} runs a cell on average"
    )
    assert decided >= 0.90 and wrong == 0


def test_a_cell_out_of_the_constraints_or_without_values_stops():
    d = racing.decide_samples(
        {"a": [1.0, 1.1, 0.9], "b": [5.0, 5.1, 4.9], "c": []},
        "higher",
        0.05,
        {"b": "out of the objective's where: peak_pss_bytes <= 200 MiB"},
    )
    assert d.best == "a" and d.decided and set(d.out) == {"b", "c"}


def test_a_race_is_undecided_while_the_runs_cannot_tell():
    d = racing.decide_samples({"a": [1.0, 1.1, 0.9], "b": [1.05, 0.95, 1.0]}, "higher", stats.race_alpha(MIN, MAX))
    assert not d.decided and set(d.contenders) == {"a", "b"}


def test_racing_repeats_in_the_file_are_checked(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from tests.conftest import cmx

    cases = [
        ("{min: 5, max: 3}", "e.yaml:3:10: repeats: max (3) is below min (5)"),
        ("{min: 3, mx: 3}", "unknown key 'mx' in repeats (allowed: min, max, until); did you mean 'max'?"),
        ("{min: 1, max: 3}", "repeats.min: "),
        ("{min: 3, max: 5, until: tired}", "repeats.until: "),
        ("0", "repeats: "),
    ]
    files = []
    for i, (repeats, _) in enumerate(cases):
        (tmp_path / str(i)).mkdir()
        files.append(tmp_path / str(i) / "e.yaml")
        files[-1].write_text(f"name: e\nworkload: {{name: throughput}}\nrepeats: {repeats}\n")
    good = tmp_path / "good.yaml"
    good.write_text(
        "name: e\nworkload: {name: throughput}\nmatrix: {pool: [solo, threads]}\nrepeats: {min: 3, max: 10}\n"
    )
    with ThreadPoolExecutor(max_workers=len(files) + 1) as pool:  # independent CLI processes, run at once
        *procs, proc = pool.map(lambda f: cmx("validate", str(f), timeout=120), [*files, good])
    for (repeats, said), bad in zip(cases, procs):
        assert bad.returncode == 2 and said in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, (
            repeats,
            bad.stderr,
        )
    assert proc.returncode == 0 and "2 cells × 3–10 repeats (racing) = at most 20 runs" in proc.stdout, proc.stdout
    assert "each of its 8 looks tests at 0.019" in proc.stdout, proc.stdout

"""Racing repeats (issues 38, 50): the race's rule (analysis/racing.py) through the real statistics,
by simulation with known answers, 1,000 seeded races a case, vectorised over races through
:func:`racing.decide_look` (the rule :func:`racing.decide_samples` applies to one race; a test holds
the two equal). Among identical cells, 2 to 20 of them, a race stops some cell in at most 5 % of
races, despite looking after every round and comparing the luckiest cell with the others; one cell
10 % better among 5 at 5 % run-to-run spread is chosen within 10 runs a cell in at least 85 % of
races; a cell 2× worse is out at the first look, at 3 runs a cell."""

from __future__ import annotations

import numpy as np
import pytest

from cmx.analysis import racetest, racing

RACES = 1000
MIN, MAX = 3, 10


def _races(
    means: list[float],
    spread: float,
    seed: int,
    min_n: int = MIN,
    max_n: int = MAX,
    looks: int | None = None,
    races: int = RACES,
):
    """``races`` races of cells whose runs are N(mean, spread × mean), each cell stopped as the rule
    says at each look from ``min_n`` (``looks`` of them, every one to ``max_n`` when None): (racing
    [races, cells] at the end, the chosen cell or -1, runs a cell when decided)."""
    rng = np.random.default_rng(seed)
    k = len(means)
    mean = np.asarray(means, float)[None, :, None]
    x = rng.normal(mean, spread * mean, (races, k, max_n))
    alive = np.ones((races, k), bool)
    done = np.zeros(races, bool)
    chosen, at = np.full(races, -1), np.full(races, max_n)
    last = max_n if looks is None else min_n + looks - 1
    for n in range(min_n, last + 1):
        look, _, stopped, same = racing.decide_look(x[:, :, :n], alive, "higher", racing.level(min_n, max_n, k, n))
        alive &= ~(stopped & ~done[:, None])
        others = alive.copy()
        others[np.arange(races), look.best] = False
        now = ~done & ~(others & ~same).any(axis=1)
        chosen[now], at[now] = look.best[now], n
        done |= now
    return alive, chosen, at


@pytest.mark.parametrize("cells", [2, 5, 10, 20])
def test_identical_cells_rarely_lose_one(cells):
    """~0.1 s (2 cells) to ~0.5 s (20 cells): 1,000 races of 8 looks each, vectorised."""
    alive, _, _ = _races([100] * cells, 0.05, seed=50_000 + cells)
    false = np.mean(~alive.all(axis=1))
    print(f"{cells} identical cells: some cell stopped in {false:.1%} of {RACES} races")
    assert false <= 0.05


def test_a_cell_10_pct_better_among_5_is_chosen_within_10_runs():
    alive, chosen, at = _races([110, 100, 100, 100, 100], 0.05, seed=51_000)
    right = np.mean(chosen == 0)
    wrong = np.mean((chosen > 0) | ~alive[:, 0])
    print(
        f"10 % better among 5 at 5 % spread: chosen in {right:.1%} of {RACES} races (wrong {wrong:.1%}), "
        f"at {at[chosen == 0].mean():.1f} runs a cell on average ({np.median(at[chosen == 0]):.0f} median)"
    )
    assert right >= 0.85 and wrong == 0


@pytest.mark.parametrize("cells", [2, 5])
def test_a_cell_2x_worse_is_out_at_the_first_look(cells):
    alive, _, _ = _races([100] * (cells - 1) + [50], 0.05, seed=52_000 + cells, looks=1)
    out = np.mean(~alive[:, -1])
    print(f"2× worse among {cells}: out at the first look (3 runs a cell) in {out:.1%} of {RACES} races")
    assert out >= 0.95 and np.mean(~alive[:, :-1].all(axis=1)) <= 0.05


def test_one_race_through_decide_samples_is_the_vectorised_rule():
    """decide_samples (dicts, one race) and decide_look (arrays, many) stop the same cells."""
    rng = np.random.default_rng(53_000)
    x = rng.normal(np.array([100, 100, 93, 88])[None, :, None], 5, (40, 4, 6))
    level = racing.level(MIN, MAX, 4, 6)
    _, _, stopped, same = racing.decide_look(x, np.ones((40, 4), bool), "higher", level)
    for row in range(40):
        d = racing.decide_samples({f"c{i}": list(x[row, i]) for i in range(4)}, "higher", level)
        assert {c for c in d.out} == {f"c{i}" for i in range(4) if stopped[row, i]}
        assert set(d.same) == {f"c{i}" for i in range(4) if same[row, i]}
    assert stopped.any() and not stopped.all(axis=1).any()


def test_a_difference_inside_the_margin_does_not_stop_a_cell():
    """+1.2 % shown beyond doubt (0.1 % spread) is not worse by what the user cares about: the cell
    is shown the same and the race ends decided, as a tie."""
    rng = np.random.default_rng(54_000)
    best = list(rng.normal(101.2, 0.1, 5))
    other = list(rng.normal(100, 0.1, 5))
    far = list(rng.normal(80, 0.1, 5))
    d = racing.decide_samples({"a": best, "b": other, "c": far}, "higher", racing.level(MIN, MAX, 3, 5))
    assert d.best == "a" and d.same == ["b"] and d.decided and d.tied == ["b"]
    assert set(d.out) == {"c"} and "shown worse than a: -21" in d.out["c"]
    assert d.versus["b"].verdict == racing.SAME and d.versus["b"].change_pct == pytest.approx(-1.2, abs=0.2)


def test_the_level_spends_the_race_error_over_its_looks_and_cells():
    two, five, twenty = (racing.level(MIN, MAX, k) for k in (2, 5, 20))
    assert two > five > twenty > 0  # more cells, a stricter level
    # the first look is the strictest
    assert racing.level(MIN, MAX, 5, 3) == pytest.approx(five * (3 / MAX) ** racetest.RACE_SHAPE)
    assert racetest.race_alpha(MIN, 20, 5) < racetest.race_alpha(MIN, MAX, 5) * 2  # more looks, not a looser race
    # the table is the calibration: one entry computed afresh (~0.5 s)
    assert racetest.race_alpha(4, 6, 3) == pytest.approx(
        racetest.race_level_of(racetest._race_smallest(3, 6, racetest.RACE_SEQUENCES), 4, 6), rel=1e-5
    )


def test_an_undecided_race_says_what_would_decide_it():
    """8 % worse at 5 % spread after 4 runs a cell: not yet told apart; the race says the runs a cell
    it would take, and a race whose max is below them is told to raise it."""
    rng = np.random.default_rng(55_000)
    samples = {c: list(rng.normal(m, 0.05 * m, 4)) for c, m in (("a", 108), ("b", 100), ("c", 100))}
    d = racing.decide_samples(samples, "higher", racing.level(MIN, 6, 3, 4))
    assert not d.decided and d.best == "a" and set(d.tied) == {"b", "c"}
    need = d.runs_to_decide()
    assert need is not None and need > 6
    said = racing.open_text(d, str, 6)
    assert said.startswith("a leads; 2 cells are not told apart from it: ") and said.endswith(f"raise max to {need}")
    assert not racing.open_text(d, str, need).endswith(f"raise max to {need}")
    one = racing.decide_samples({"a": samples["a"], "b": samples["b"]}, "higher", racing.level(MIN, 6, 2, 4))
    assert "a leads; 1 cell is not told apart from it: b; " in racing.open_text(one, str, 6)
    assert racing.cells_text(1, "was") == "1 cell was" and racing.cells_text(3) == "3 cells are"


def test_the_race_ends_with_a_tie_or_with_what_would_decide_it():
    from types import SimpleNamespace

    from cmx.cli.race import Race

    race = Race.__new__(Race)  # its last line only: no sweep, no database
    race.exp = SimpleNamespace(racing=SimpleNamespace(min=3, max=6))
    race.skipped, race.ran, race.objective = 0, 14, "maximize consume_rate"
    race.ended = "max (6 runs a cell) was reached"
    same = racing.Versus(racing.SAME, -1.0, 0.5)
    race.decision = racing.Decision("a", ["a", "b"], {"c": "shown worse"}, ["b"], {"a": racing.Versus(racing.BEST)})
    race.decision.versus["b"] = same
    assert race.summary(str) == (
        "race: decided on maximize consume_rate: a tie: a leads and 1 cell is shown within ±5 % of it (b): pick "
        "any; every other cell was shown worse (or out of the objective's where) after 14 runs, of at most 3 cells × 6"
    )
    race.decision = racing.Decision(
        "a", ["a", "b", "c"], {}, [], {"b": racing.Versus(racing.OPEN, -8.0, 0.1, 9), "c": same}
    )
    assert race.summary(str) == (
        "race: undecided on maximize consume_rate: max (6 runs a cell) was reached; a leads; 2 cells are not told "
        "apart from it: b; c; the differences seen would take more than 1000 runs a cell to decide: they may be "
        "too small to matter"
    )
    race.decision.versus["c"] = racing.Versus(racing.OPEN, -6.0, 0.2, 12)
    assert race.summary(str).endswith("would take 12 runs a cell to decide: raise max to 12")


def test_a_cell_out_of_the_constraints_or_without_values_stops():
    d = racing.decide_samples(
        {"a": [1.0, 1.1, 0.9], "b": [5.0, 5.1, 4.9], "c": []},
        "higher",
        0.05,
        {"b": "out of the objective's where: peak_pss_bytes <= 200 MiB"},
    )
    assert d.best == "a" and d.decided and set(d.out) == {"b", "c"}


def test_a_race_is_undecided_while_the_runs_cannot_tell():
    d = racing.decide_samples({"a": [1.0, 1.1, 0.9], "b": [1.05, 0.95, 1.0]}, "higher", racing.level(MIN, MAX, 2, 3))
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
    two = tmp_path / "two.yaml"
    two.write_text(good.read_text().replace("min: 3", "min: 2"))
    with ThreadPoolExecutor(max_workers=len(files) + 2) as pool:  # independent CLI processes, run at once
        *procs, proc, early = pool.map(lambda f: cmx("validate", str(f), timeout=120), [*files, good, two])
    for (repeats, said), bad in zip(cases, procs):
        assert bad.returncode == 2 and said in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, (
            repeats,
            bad.stderr,
        )
    assert proc.returncode == 0 and "2 cells × 3–10 repeats (racing) = at most 20 runs" in proc.stdout, proc.stdout
    assert "its 8 looks test at " in proc.stdout and "its first look (3 runs a cell) stops a cell about" in proc.stdout
    assert "can never decide" not in proc.stdout, proc.stdout
    assert early.returncode == 0 and (
        "its first look, at 2 runs a cell, can never decide (the rule needs 3 runs a cell): min: 3 would let it"
    ) in early.stdout.replace("\n", " "), early.stdout

"""Change points of one series (analysis/changepoints.py) against known answers: changes a few nights
apart in short histories, both directions, few runs a night, the nights noisier than the runs
(issue 49). Pure functions of seeded samples: no database."""

from __future__ import annotations

import numpy as np
import pytest

from cmx.analysis import stats
from cmx.analysis.changepoints import SEGMENTED, boundary_ps, change_points, segment, windows


def _nights(levels, runs=3, run_cv=0.01, night_cv=0.0, seed=49):
    rng = np.random.default_rng(seed)
    levels = np.asarray(levels, dtype=float)
    shift = 1 + night_cv * rng.standard_normal(len(levels))
    values = levels[:, None] * shift[:, None] * (1 + run_cv * rng.standard_normal((len(levels), runs)))
    return [list(v) for v in values]


def _found(levels, better="lower", **kwargs):
    runs = _nights(levels, **kwargs)
    found = change_points(runs, [float(np.median(r)) for r in runs], better)
    return [(i, c.verdict, c.change_pct) for i, c, *_ in found.changes]


def _truth(levels, at):
    return 100 * (levels[at] / levels[at - 1] - 1)


def test_the_issues_nightly_a_regression_its_fix_and_a_new_regression_are_each_found_at_their_size():
    # service_time_p50 (ms): a regression for three nights, fixed, then another on the latest night
    levels = [5.2] * 4 + [7.3] * 3 + [5.2] * 3 + [7.8]
    found = _found(levels)
    assert [(i, v) for i, v, _ in found] == [(4, "worse"), (7, "better"), (10, "worse")]
    for i, _, pct in found:
        assert abs(pct - _truth(levels, i)) <= 2.0, found


@pytest.mark.parametrize("seed", range(6))
def test_close_changes_both_ways_in_short_histories_with_noisy_nights(seed):
    rng = np.random.default_rng(100 + seed)
    at = [3, 3 + int(rng.integers(2, 6))]
    at.append(at[1] + int(rng.integers(2, 6)))  # 2 to 5 nights apart
    n = at[-1] + 1 + int(rng.integers(0, 3))  # the last change on the latest night, or up to two before it
    levels = np.full(n, 1000.0)
    for k, a in enumerate(at):
        levels[a:] = levels[a - 1] * (1.3 if (k + seed) % 2 else 0.75)
    runs = _nights(levels, runs=int(rng.integers(2, 6)), run_cv=0.005, night_cv=0.01, seed=seed)
    changes = change_points(runs, [np.median(r) for r in runs], "higher").changes
    found = [(i, c.verdict, c.change_pct) for i, c, *_ in changes]
    # each true change found at its night; a step the nights' own noise made may be reported small, never more
    assert [i for i, v, _ in found if v != "small"] == at, (levels.round(), found)
    # each measured between its neighbouring segments: within 2 points of their runs' medians' change
    edges = [0, *[i for i, _, _ in found], n]
    for k, (i, _, pct) in enumerate(found, 1):
        before, after = np.concatenate(runs[edges[k - 1] : i]), np.concatenate(runs[i : edges[k + 1]])
        assert abs(pct - 100 * (np.median(after) / np.median(before) - 1)) <= 2.0, found
        if i in at and edges[k - 1] in [0, *at] and edges[k + 1] in [*at, n]:
            assert abs(pct - _truth(levels, i)) <= 3.0, found  # and near the true size (a night's noise aside)


def test_no_change_no_change_found_when_the_nights_are_noisier_than_the_runs():
    """Cost: 40 histories of 12 nights, ~0.5 s."""
    false = sum(len(_found([1000.0] * 12, run_cv=0.005, night_cv=0.02, seed=s)) for s in range(40))
    assert false <= 4  # 480 series-nights: under 1 per 100 (the target)


def test_one_night_off_between_steady_ones_is_two_changes():
    found = _found([1000.0] * 6 + [700.0] + [1000.0] * 5, better="higher")
    assert [(i, v) for i, v, _ in found] == [(6, "worse"), (7, "better")]


def test_the_latest_night_is_judged_against_the_stable_nights_just_before_it():
    # consume_rate: 365, 490, 500, then 235/s, the last night's runs below all nine before
    found = _found([365.0, 490.0, 500.0, 235.0], better="higher")
    assert found[-1][:2] == (3, "worse")


def test_a_boundary_is_tested_between_its_neighbours_with_the_variance_of_every_segment():
    x = np.array([10.0, 11.0, 10.0, 20.0, 21.0, 20.0])
    ps, steps = boundary_ps(x, [0, 3, 6])
    # Student's t with the two segments' pooled variance: scipy's own test of the two
    assert ps[0] == pytest.approx(stats._sps().ttest_ind(x[:3], x[3:]).pvalue)
    assert steps[0] == pytest.approx(10 / np.mean(x))  # on the scaled medians
    assert boundary_ps(x, [0, 1, 2, 3, 4, 5, 6])[0].tolist() == [1.0] * 5  # no degree of freedom left
    assert segment(x) == [(3, pytest.approx(ps[0]))]
    assert segment([5.0] * 8) == []


def test_a_long_history_is_segmented_in_overlapping_windows_ending_at_the_latest_night():
    assert windows(12) == [(0, 12)]
    assert windows(70) == [(0, 30), (15, 45), (30, 60), (40, 70)]
    found = _found([1000.0] * 40 + [800.0] * 30, better="higher")
    assert [(i, v) for i, v, _ in found] == [(40, "worse")]
    runs = _nights([1000.0] * 40 + [800.0] * 30)
    [(_, _, how, p)] = change_points(runs, [float(np.median(r)) for r in runs], "higher").changes
    assert how == SEGMENTED and p < 1e-6

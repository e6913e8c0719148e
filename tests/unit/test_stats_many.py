"""stats.summarize_many: one bootstrap per sample size, the figures of summarize."""

from __future__ import annotations


def test_summarize_many_gives_summarize_figures():
    # The report's per-cell intervals come from one bootstrap per sample size: the same figures
    # as one bootstrap per cell, so the report and `cmx summary` agree.
    import random

    from cmx.analysis import stats

    rnd = random.Random(7)
    samples = [[rnd.gauss(100, 10) for _ in range(n)] for n in [3] * 20 + [5] * 5 + [1, 0, 2]]
    samples += [[1.0, 1.0, 1.0], [float("nan"), 2.0, 3.0], [None, 4.0]]
    assert stats.summarize_many(samples) == [stats.summarize(s) for s in samples]


def _same(x, y) -> bool:
    # repr: floats to the last bit, and nan equal to nan
    return repr(x) == repr(y)


def test_compare_many_gives_compare_samples_comparisons():
    # `cmx recommend` compares the best cell with every other in one batch (stats.compare_many);
    # every Comparison must be the one compare_samples gives the pair alone, so ranks, ties and
    # "runs needed" do not depend on how many cells there are.
    import random

    from cmx.analysis import stats

    rnd = random.Random(11)
    base = [rnd.gauss(100, 10) for _ in range(3)]
    contenders = [
        [rnd.gauss(mu, 10) for _ in range(n)]
        for n, mu in [(3, 100)] * 10 + [(3, 150)] * 5 + [(4, 60)] * 5 + [(5, 100), (2, 100), (1, 90), (0, 0)]
    ]
    contenders += [
        list(base),
        [base[0]] * 3,
        [round(v) for v in base],
        [1.0, 1.0, 2.0],
        [rnd.gauss(100, 1) for _ in range(20)],
        [None, 3.0, float("nan"), 4.0, 5.0],
    ]
    for better in ("higher", "lower", "neither"):
        many = stats.compare_many(base, contenders, better)
        assert _same(many, [stats.compare_samples(base, c, better) for c in contenders])
    for base in ([1.0, 1.0, 2.0], [0.0, 0.0, 0.0], [0.0, 1.0, 2.0], [5.0] * 8):
        assert _same(
            stats.compare_many(base, contenders, "higher"),
            [stats.compare_samples(base, c, "higher") for c in contenders],
        )


def test_compare_many_property():
    # The same, on samples hypothesis draws: ties, zeros, equal values and sizes 0 to 9.
    from hypothesis import HealthCheck, example, given, settings, strategies as st

    from cmx.analysis import stats

    value = st.sampled_from([0.0, 1.0, 2.0, 2.5, 100.0, -3.0]) | st.floats(-1e6, 1e6, allow_nan=False)
    sample = st.lists(value, min_size=0, max_size=9)

    @example([1.0, 1.0, 2.0555563429263857e-223], [[0.0, 0.0, 1.0]], "higher")  # runs_needed overflowed
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(sample, st.lists(sample, min_size=1, max_size=6), st.sampled_from(["higher", "lower", "neither"]))
    def check(base, contenders, better):
        assert _same(
            stats.compare_many(base, contenders, better, resamples=200),
            [stats.compare_samples(base, c, better, resamples=200) for c in contenders],
        )

    check()


def test_mann_whitney_pairs_gives_mann_whitney_p():
    from cmx.analysis import stats

    base = [1.0, 2.0, 3.0, 4.0]
    others = [
        [5.0, 6.0, 7.0, 8.0],
        [1.0, 2.0, 2.0, 9.0],
        [4.0, 4.0, 4.0],
        [1.0] * 4,
        [],
        [3.5] * 30,
        [float(i) for i in range(40)],
        [2.0, 3.0],
    ]
    assert _same(stats.mann_whitney_pairs([(base, o) for o in others]), [stats.mann_whitney_p(base, o) for o in others])


def test_compare_pairs_and_mann_whitney_pairs_property():
    # `cmx trend` tests the latest night of every series at once, each against its own history
    # (stats.compare_pairs, stats.mann_whitney_pairs): each answer must be the one the pair gets alone.
    from hypothesis import HealthCheck, given, settings, strategies as st

    from cmx.analysis import stats

    value = st.sampled_from([0.0, 1.0, 2.0, 2.5, 100.0, -3.0]) | st.floats(-1e6, 1e6, allow_nan=False)
    sample = st.lists(value, min_size=0, max_size=7)
    pair = st.tuples(sample, sample, st.sampled_from(["higher", "lower", "neither"]))

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(pair, min_size=1, max_size=5), st.sampled_from([5.0, 1.0]))
    def check(pairs, margin):
        pairs += [(a, [v * 1.5 for v in b], better) for a, b, better in pairs[:2]]  # sizes shared: batches of rows
        assert _same(
            stats.compare_pairs(pairs, resamples=200, margin_pct=margin),
            [stats.compare_samples(a, b, better, resamples=200, margin_pct=margin) for a, b, better in pairs],
        )
        assert _same(
            stats.mann_whitney_pairs([(a, b) for a, b, _ in pairs]), [stats.mann_whitney_p(a, b) for a, b, _ in pairs]
        )

    check()


def test_compare_pairs_of_long_histories_against_a_night():
    # The shapes trend batches: ~90 runs before against a night's 3 (asymptotic p), and 12 against 4.
    import random

    from cmx.analysis import stats

    rnd = random.Random(3)
    pairs = [
        ([rnd.gauss(1000, 20) for _ in range(n)], [rnd.gauss(mu, 20) for _ in range(m)], better)
        for n, m in [(90, 3), (90, 4), (12, 4), (12, 3)]
        for mu in (800, 1000, 1010, 1200)
        for better in ("higher", "lower")
    ]
    pairs.append(([0.0] * 7 + [1.0] * 5, [0.0, 0.0, 2.0, 3.0], "higher"))  # a zero median beside the others
    assert _same(stats.compare_pairs(pairs), [stats.compare_samples(a, b, better) for a, b, better in pairs])

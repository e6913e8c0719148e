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

"""The statistics cache (analysis/statcache.py): numbers read back are the numbers computed, a
finished point is bootstrapped once, a changed sample is computed again, and a cache that cannot
be written changes nothing but the time."""

from __future__ import annotations

import pytest

from cmx.analysis import statcache, stats

SAMPLES = [[1000.0, 1010.0, 995.0], [700.0, 705.0, 699.0], [5.0], [], [1.0, 2.0, 3.0, 4.0]]


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """The samples stats.summarize_many is asked to compute, per call."""
    monkeypatch.setenv("CMX_STATS_CACHE", str(tmp_path / "stats.duckdb"))
    calls: list[int] = []
    real = stats.summarize_many

    def spy(samples, resamples=stats.RESAMPLES):
        calls.append(len(samples))
        return real(samples, resamples)

    monkeypatch.setattr(stats, "summarize_many", spy)
    return calls


def _plain(series):
    return [stats.summarize_many(runs) for runs in series]


def test_summaries_read_back_are_the_computed_ones_and_computed_once(counted):
    with statcache.Cache() as cache:
        first = cache.summarize_series([SAMPLES, SAMPLES[1:], SAMPLES])  # two cells with the same values
    assert first == _plain([SAMPLES, SAMPLES[1:], SAMPLES])
    counted.clear()
    with statcache.Cache() as cache:
        again = cache.summarize_series([SAMPLES, SAMPLES[1:], SAMPLES])
    assert again == first and counted == [0]  # nothing bootstrapped again


def test_a_grown_series_computes_only_its_new_points_and_replaces_its_prefix(counted):
    import duckdb

    with statcache.Cache() as cache:
        cache.summarize_series([SAMPLES[:2]])
    counted.clear()
    with statcache.Cache() as cache:  # two nights more
        got = cache.summarize_series([SAMPLES[:4]])
    assert counted == [2] and got == _plain([SAMPLES[:4]])
    with duckdb.connect(str(statcache.path()), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM series_summaries").fetchone() == (1,)


def test_a_changed_or_new_sample_is_computed_again(counted):
    with statcache.Cache() as cache:
        cache.summarize_series([SAMPLES])
    counted.clear()
    changed = [SAMPLES[0], [700.0, 705.0, 698.0], [1.0, 2.0]]
    with statcache.Cache() as cache:
        got = cache.summarize_series([changed])
    assert counted == [3] and got == _plain([changed])  # no stored row is a prefix of it


def test_tests_and_series_changes_read_back_are_the_computed_ones(tmp_path, monkeypatch):
    from cmx.analysis import trend

    monkeypatch.setenv("CMX_STATS_CACHE", str(tmp_path / "stats.duckdb"))
    before, after = [1000.0, 1010.0, 995.0, 1003.0] * 3, [700.0, 705.0, 699.0]
    runs = [[1000.0, 1010.0, 995.0], [1003.0, 1001.0, 998.0], [1002.0, 997.0, 1006.0], [700.0, 705.0, 699.0]]
    medians = [stats.summarize(r).median for r in runs]
    with statcache.Cache() as cache:
        computed, quiet = cache.tests(
            [(before, after, "higher", 5.0), (before, before, "higher", 5.0)], trend.shown_many
        )
        changes = cache.many(trend.change_steps, [(runs, medians, "higher", 5.0, True)], trend.shown_many)
    assert computed.verdict == stats.WORSE and quiet is None
    assert changes == [trend.change_points(runs, medians, "higher", 5.0, full_latest=True)]
    assert changes[0].changes[0][0] == 3 and changes[0].latest.verdict == stats.WORSE

    def never(*args, **kwargs):
        pytest.fail("computed again")

    monkeypatch.setattr(stats, "compare_samples", never)
    monkeypatch.setattr(stats, "mann_whitney_p", never)
    monkeypatch.setattr(stats, "compare_pairs", never)
    monkeypatch.setattr(stats, "mann_whitney_pairs", never)
    with statcache.Cache() as cache:
        assert cache.tests([(before, after, "higher", 5.0)], never) == [computed]
        assert cache.tests([(before, before, "higher", 5.0)], never) == [None]
        assert cache.many(never, [(runs, medians, "higher", 5.0, True)], None) == changes


def test_a_cache_that_cannot_be_written_changes_nothing_but_the_time(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("CMX_STATS_CACHE", str(blocker / "stats.duckdb"))
    with statcache.Cache() as cache:
        assert cache.summarize_series([SAMPLES]) == _plain([SAMPLES])
    (tmp_path / "junk.duckdb").write_text("not a database")
    monkeypatch.setenv("CMX_STATS_CACHE", str(tmp_path / "junk.duckdb"))
    with statcache.Cache() as cache:
        assert cache.summarize_series([SAMPLES]) == _plain([SAMPLES])


def test_a_grown_series_changes_are_the_computed_ones(tmp_path, monkeypatch):
    from cmx.analysis import trend

    monkeypatch.setenv("CMX_STATS_CACHE", str(tmp_path / "stats.duckdb"))
    runs = [[1000.0 + i % 3, 1010.0, 995.0 + i % 5] for i in range(12)] + [[700.0, 705.0, 699.0]] * 3
    for nights in (len(runs) - 2, len(runs) - 1, len(runs)):  # night after night
        grown = runs[:nights] + [[650.0, 640.0, 655.0]]
        with statcache.Cache() as cache:
            medians = [p.median for p in cache.summarize_series([grown])[0]]
            got = cache.many(trend.change_steps, [(grown, medians, "higher", 5.0, False)], trend.shown_many)
        assert got == [trend.change_points(grown, medians, "higher", 5.0)] and got[0].changes[0][0] == 12


def test_many_series_tested_in_batches_find_the_changes_one_by_one_finds(tmp_path, monkeypatch):
    # Cache.many advances all series together, each round's new tests in one batch (trend.shown_many):
    # every series' changes must be what trend.change_points finds alone, test by test with trend.shown,
    # on the first night and on the night after (its earlier tests read back, only the new ones computed).
    import random

    from cmx.analysis import trend

    monkeypatch.setenv("CMX_STATS_CACHE", str(tmp_path / "stats.duckdb"))
    rnd = random.Random(5)
    series = []
    for k in range(12):
        step = [1.0, 0.8, 1.3, 1.0][k % 4]
        runs = [
            [rnd.gauss(1000 * (step if i >= 8 + k % 5 else 1.0), 10 + k) for _ in range(3 + (i % 3 == 0))]
            for i in range(20 + k)
        ]
        series.append((runs, [k % 2 and "higher" or "lower", "neither"][k % 3 == 0]))
    series.append(series[0])  # two cells with the same values
    series.append(([[5.0, 5.0, 5.0]] * 6 + [[5.0, 5.0]], "higher"))  # ties, a short last point
    for night in (0, 1):
        grown = [(runs + [[rnd.gauss(700, 10) for _ in range(3)]] * night, better) for runs, better in series]
        medians = [[stats.summarize(r).median for r in runs] for runs, _ in grown]
        with statcache.Cache() as cache:
            got = cache.many(
                trend.change_steps,
                [(runs, m, better, 5.0, k % 2 == 0) for k, ((runs, better), m) in enumerate(zip(grown, medians))],
                trend.shown_many,
            )
        alone = [
            trend.change_points(runs, m, better, 5.0, test=_shown_alone, full_latest=k % 2 == 0)
            for k, ((runs, better), m) in enumerate(zip(grown, medians))
        ]
        assert repr(got) == repr(alone) and any(f.changes for f in got)


def _shown_alone(before, after, better, margin_pct, full=False):
    """trend.shown as it was before it was batched: one Mann-Whitney test, then one compare_samples."""
    if not full and (min(len(before), len(after)) < stats.MIN_N or stats.mann_whitney_p(before, after) > stats.ALPHA):
        return None
    result = stats.compare_samples(before, after, better, margin_pct=margin_pct)
    return result if full or result.verdict in stats.SHOWN else None

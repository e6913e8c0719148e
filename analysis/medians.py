"""Medians of runs with seeded percentile-bootstrap intervals (scipy's ``bootstrap``), one sample at a
time or thousands batched into one scipy call with the same numbers, and a sample's spread (its
coefficient of variation: over :data:`UNSTABLE_CV` it is flagged unstable, as pyperf warns).
``cmx.analysis.stats`` compares two samples from these and re-exports them."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np


def _sps():
    """scipy.stats, imported when a number must be computed (~0.4 s): ``cmx trend`` reading back a
    finished history (analysis/statcache.py) computes none."""
    from scipy import stats

    return stats


RESAMPLES = 2000
SEED = 13  # fixed: the same data always gives the same interval
CONFIDENCE = 0.95
UNSTABLE_CV = 0.10  # pyperf warns above a standard deviation of 10 % of the mean


@dataclass(frozen=True)
class Summary:
    """n, median and the 95 % bootstrap interval of the median of one sample; ``cv``: its
    coefficient of variation (None below 2 runs or at a zero mean)."""

    n: int
    median: float | None
    low: float | None
    high: float | None
    cv: float | None = None

    @property
    def unstable(self) -> bool:
        return self.cv is not None and self.cv > UNSTABLE_CV

    def as_dict(self) -> dict:
        return {"n": self.n, "median": self.median, "low": self.low, "high": self.high, "unstable": self.unstable}


def _clean(values) -> np.ndarray:
    return np.asarray([float(v) for v in values if v is not None and not _nan(v)], dtype=float)


def _nan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _cv(x: np.ndarray) -> float | None:
    if len(x) < 2:
        return None
    mean = float(np.mean(x))
    if mean == 0:
        return None
    return float(np.std(x, ddof=1) / abs(mean))


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def _bootstrap(data: tuple, statistic, resamples: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile-bootstrap interval (scipy), vectorized over leading axes, seeded."""
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")  # degenerate (all-equal) samples: the interval is the point
        res = _sps().bootstrap(
            data,
            statistic,
            n_resamples=resamples,
            vectorized=True,
            axis=-1,
            confidence_level=CONFIDENCE,
            method="percentile",
            rng=_rng(),
        )
    return np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)


def summarize(values: list[float], resamples: int = RESAMPLES) -> Summary:
    """n, median and percentile-bootstrap interval of the median (seeded, so reproducible)."""
    return summarize_many([values], resamples)[0]


#: Resampled values held at once by :func:`summarize_many` (rows × resamples × n; 8 bytes each).
BATCH_VALUES = 8_000_000


def _sorted_median(x, axis=-1):
    """np.median's value by one sort along ``axis``: ~4× faster on short rows (np.median
    partitions each row)."""
    s = np.moveaxis(np.sort(x, axis=axis), axis, -1)
    n = s.shape[-1]
    return s[..., n // 2] if n % 2 else (s[..., n // 2 - 1] + s[..., n // 2]) / 2


def summarize_many(samples: list, resamples: int = RESAMPLES) -> list[Summary]:
    """:func:`summarize` of each sample, the same numbers, in one scipy bootstrap per sample size:
    scipy draws one set of resample indices for all rows of a batch from the same seed, so each
    row's interval is exactly the one :func:`summarize` gives it alone (``cmx trend`` summarizes
    thousands of points; one bootstrap call each costs ~1 ms)."""
    # sorted: the seeded resamples pick positions, so the same runs read in another order (by
    # repeat in the sweep's summary, by run id in cmx recommend) would get another interval
    cleaned = [np.sort(_clean(v)) for v in samples]
    out: list[Summary | None] = [None] * len(cleaned)
    by_n: dict[int, list[int]] = {}
    for i, x in enumerate(cleaned):
        if len(x) == 0:
            out[i] = Summary(0, None, None, None)
        elif len(x) == 1:
            out[i] = Summary(1, float(x[0]), float(x[0]), float(x[0]))
        else:
            by_n.setdefault(len(x), []).append(i)
    for n, rows in by_n.items():
        step = max(1, BATCH_VALUES // (resamples * n))
        for start in range(0, len(rows), step):
            part = rows[start : start + step]
            data = np.stack([cleaned[i] for i in part])
            meds = np.median(data, axis=-1)
            low, high = _bootstrap((data,), _sorted_median, resamples)
            for j, i in enumerate(part):
                med = float(meds[j])
                # A percentile interval of the median always holds the median; clip float noise.
                out[i] = Summary(n, med, min(float(low[j]), med), max(float(high[j]), med), _cv(cleaned[i]))
    return out

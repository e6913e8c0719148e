"""The statistics of a finished point, computed once: a content-keyed cache of
:func:`stats.summarize_many`'s summaries, of the tests of candidate changes (``trend.shown``) and
of each series' change points (``trend.change_points``).

A point's summary is a pure function of its runs' values (scipy's bootstrap is seeded), and results
are append-only, so a finished night's point never changes: ``cmx trend`` over a year of nights
bootstraps 73,000 points the first time (~30 s here) and only the new night's after that. The
key is a hash of the values in the order they are summarized, of the arguments, and of the
source of analysis/stats.py itself: a change to how cmx computes a number can never read an old
one. The cache is a DuckDB file in the user's cache dir (``$XDG_CACHE_HOME/cmx``, or
``CMX_STATS_CACHE``); when it cannot be opened or written (another process holds it, a read-only
home) the numbers are computed as before and nothing else changes.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

import duckdb
import numpy as np

from cmx.analysis import stats


@lru_cache(maxsize=1)
def _version() -> str:
    return hashlib.blake2b(Path(stats.__file__).read_bytes(), digest_size=8).hexdigest()


def path() -> Path:
    if os.environ.get("CMX_STATS_CACHE"):
        return Path(os.environ["CMX_STATS_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "cmx" / "stats.duckdb"


@lru_cache(maxsize=1)
def _seeded():
    return hashlib.blake2b(_version().encode(), digest_size=16)


def _key(*parts) -> str:
    digest = _seeded().copy()
    for part in parts:
        digest.update(np.asarray(part, dtype=float).tobytes() if isinstance(part, (list, np.ndarray))
                      else repr(part).encode())
        digest.update(b"|")
    return digest.hexdigest()


_SCHEMA = """CREATE TABLE IF NOT EXISTS summaries (key VARCHAR PRIMARY KEY, n INTEGER, median DOUBLE,
                 low DOUBLE, high DOUBLE, cv DOUBLE);
             CREATE TABLE IF NOT EXISTS comparisons (key VARCHAR PRIMARY KEY, value VARCHAR);
             CREATE TABLE IF NOT EXISTS series_changes (key VARCHAR PRIMARY KEY, value VARCHAR)"""


class Cache:
    """One use of the cache: read through one read-only connection, computed numbers stored at the end
    (``with Cache() as cache: cache.summarize_many(...)``)."""

    def __init__(self):
        self.con = None
        self.pending: dict[str, list[tuple]] = {"summaries": [], "comparisons": [], "series_changes": []}

    def __enter__(self) -> "Cache":
        if path().exists():
            try:
                self.con = duckdb.connect(str(path()), read_only=True)
            except duckdb.Error:
                self.con = None  # held by a writer, or not a cache: computed again
        return self

    def __exit__(self, *exc) -> None:
        if self.con is not None:
            self.con.close()
        if exc[0] is None:
            for table, rows in self.pending.items():
                _write(table, rows)

    def _read(self, sql: str, keys: list[str]) -> list[tuple]:
        if self.con is None or not keys:
            return []
        try:
            return self.con.execute(sql, [keys]).fetchall()
        except duckdb.Error:
            return []  # an older cache without the table

    def summarize_many(self, samples: list, resamples: int = stats.RESAMPLES) -> list[stats.Summary]:
        """:func:`stats.summarize_many`, each sample's summary read back when it was computed before."""
        keys = [_key(list(s), resamples) for s in samples]
        found = {k: stats.Summary(n, m, lo, hi, cv) for k, n, m, lo, hi, cv in self._read(
            "SELECT key, n, median, low, high, cv FROM summaries WHERE key IN (SELECT unnest(?::VARCHAR[]))", keys)}
        missing = [i for i, k in enumerate(keys) if k not in found]
        computed = stats.summarize_many([samples[i] for i in missing], resamples)
        new = {keys[i]: s for i, s in zip(missing, computed)}
        self.pending["summaries"] += [(k, s.n, s.median, s.low, s.high, s.cv) for k, s in new.items()]
        found |= new
        return [found[k] for k in keys]

    def memo(self, test):
        """``test(before, after, better, margin_pct) -> Comparison | None`` (trend.shown), each answer
        read back when these runs were tested so before."""
        def read_or_test(before, after, better, margin_pct):
            key = _key(list(before), [len(before)], list(after), better, margin_pct, stats.RESAMPLES)
            for (value,) in self._read("SELECT value FROM comparisons WHERE key IN (SELECT unnest(?::VARCHAR[]))",
                                       [key]):
                return _comparison(json.loads(value))
            result = test(before, after, better, margin_pct)
            self.pending["comparisons"].append((key, json.dumps(None if result is None else asdict(result))))
            return result
        return read_or_test

    def many(self, find, series: list[tuple], test) -> list[list]:
        """``find(runs, medians, better, margin_pct, test)`` (trend.change_points) of each series,
        read back in one query for the series whose runs are what they were (a finished history)."""
        keys = [_key([v for r in runs for v in r], [len(r) for r in runs], better, margin_pct, stats.RESAMPLES)
                for runs, _, better, margin_pct in series]
        found = {k: [(i, _comparison(c), how) for i, c, how in json.loads(v)] for k, v in self._read(
            "SELECT key, value FROM series_changes WHERE key IN (SELECT unnest(?::VARCHAR[]))", keys)}
        out = []
        for key, args in zip(keys, series):
            if key not in found:
                found[key] = find(*args, test)
                self.pending["series_changes"].append(
                    (key, json.dumps([(i, asdict(c), how) for i, c, how in found[key]])))
            out.append(found[key])
        return out


def _comparison(data: dict | None) -> stats.Comparison | None:
    if data is None:
        return None
    return stats.Comparison(**{**data, "baseline": stats.Summary(**data["baseline"]),
                               "contender": stats.Summary(**data["contender"])})


def _write(table: str, rows: list[tuple]) -> None:
    if not rows:
        return
    try:
        path().parent.mkdir(parents=True, exist_ok=True)
        with duckdb.connect(str(path())) as con:
            con.execute(_SCHEMA)
            columns = list(zip(*rows))
            unnest = ", ".join(f"unnest(?) AS c{i}" for i in range(len(columns)))
            con.execute(f"INSERT OR IGNORE INTO {table} SELECT {unnest}", [list(c) for c in columns])
    except (duckdb.Error, OSError):
        pass  # another process holds the file: the next run stores them

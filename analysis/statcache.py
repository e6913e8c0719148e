"""The statistics of a finished history, computed once: a content-keyed cache of each series'
points' summaries (:func:`stats.summarize_many`), of the tests of candidate changes
(``trend.shown``) and of each series' change points (``trend.change_points``).

A point's summary is a pure function of its runs' values (scipy's bootstrap is seeded), and results
are append-only, so a finished night's point never changes: ``cmx trend`` over a year of nights
bootstraps 73,000 points the first time (~30 s here) and only the new night's after that. A
series (one cell's metric) is keyed by one hash over its points' values and sizes in order (and
the arguments, and the source of analysis/stats.py, trend.py and changepoints.py: a change to how cmx computes a number
can never read an old one): a history read again is one hash and one row a series. A series
grown by new nights finds the row of its longest stored prefix (the hash of each prefix, one
pass) and computes only the new points; the prefix's row is then replaced by the longer one. The
cache is a DuckDB file in the user's cache dir (``$XDG_CACHE_HOME/cmx``, or
``CMX_STATS_CACHE``); when it cannot be opened or written (another process holds it, a read-only
home) the numbers are computed as before and nothing else changes.
"""

from __future__ import annotations

import hashlib
import json
import os
from itertools import chain
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import duckdb
import numpy as np

from cmx.analysis import stats
from cmx.engine.paths import user_cache


@lru_cache(maxsize=1)
def _version() -> str:
    """The statistics' own code: a change to how cmx finds or computes a number never reads an old one."""
    digest = hashlib.blake2b(Path(stats.__file__).read_bytes(), digest_size=8)
    for module in ("medians.py", "trend.py", "changepoints.py"):
        digest.update((Path(stats.__file__).parent / module).read_bytes())
    return digest.hexdigest()


def path() -> Path:
    if os.environ.get("CMX_STATS_CACHE"):
        return Path(os.environ["CMX_STATS_CACHE"])
    return user_cache("stats.duckdb")


@lru_cache(maxsize=1)
def _seeded():
    return hashlib.blake2b(_version().encode(), digest_size=16)


def _key(*parts) -> str:
    digest = _seeded().copy()
    for part in parts:
        digest.update(
            np.asarray(part, dtype=float).tobytes() if isinstance(part, (list, np.ndarray)) else repr(part).encode()
        )
        digest.update(b"|")
    return digest.hexdigest()


def _test_key(before, after, better, margin_pct, full=False) -> str:
    """The key of one test of a candidate change (trend.shown): its runs either side and arguments."""
    return _key(list(before), [len(before)], list(after), better, margin_pct, bool(full), stats.RESAMPLES)


def _framed(runs: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """A series' points as one float array, each point its size then its values, and where each
    point ends in it: the bytes its keys hash."""
    counts = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
    flat = np.fromiter(chain.from_iterable(runs), dtype=float, count=int(counts.sum()))
    starts = np.cumsum(counts) - counts
    framed = np.insert(flat, starts, counts.astype(float))
    return framed, np.cumsum(counts + 1)


def series_key(runs: list[list[float]], *args) -> str:
    """The key of a whole series (its points' values and sizes, in order) and of ``args``."""
    digest = _seeded().copy()
    digest.update(repr(args).encode())
    digest.update(_framed(runs)[0].tobytes())
    return digest.hexdigest()


def _prefix_keys(runs: list[list[float]], *args) -> list[str]:
    """:func:`series_key` of ``runs[:k]`` for k = 1 … len(runs), in one pass."""
    framed, ends = _framed(runs)
    digest = _seeded().copy()
    digest.update(repr(args).encode())
    data, keys, at = memoryview(framed.tobytes()), [], 0
    for end in (ends * framed.itemsize).tolist():
        digest.update(data[at:end])
        keys.append(digest.hexdigest())
        at = end
    return keys


_SCHEMA = """CREATE TABLE IF NOT EXISTS series_summaries (key VARCHAR PRIMARY KEY, n INTEGER[], median DOUBLE[],
                 low DOUBLE[], high DOUBLE[], cv DOUBLE[]);
             CREATE TABLE IF NOT EXISTS comparisons (key VARCHAR PRIMARY KEY, value VARCHAR);
             CREATE TABLE IF NOT EXISTS series_changes (key VARCHAR PRIMARY KEY, value VARCHAR);
             CREATE TABLE IF NOT EXISTS series_tests (key VARCHAR PRIMARY KEY, tests VARCHAR[])"""


_FIELDS = ("n", "median", "low", "high", "cv")


@dataclass(frozen=True)
class Found:
    """What the search of one series found (trend.change_steps): its changes (index, comparison,
    method, the p of the test that chose it), the test of its latest point against the stable
    points before it (``latest``: None when the test showed nothing and was not asked for in full,
    or the series has one point), and, when the last change before the latest point was worse, the
    latest point against the points before that change (``standing``: is the regression still there?)."""

    changes: list
    latest: stats.Comparison | None = None
    standing: stats.Comparison | None = None


class Cache:
    """One use of the cache: read through one read-only connection, computed numbers stored at the end
    (``with Cache() as cache: cache.summarize_many(...)``)."""

    def __init__(self):
        self.con = None
        self.pending: dict[str, list[tuple]] = {
            "series_summaries": [],
            "replaced": [],
            "comparisons": [],
            "series_changes": [],
            "series_tests": [],
        }
        self.grown: dict[str, int] = {}  # a series' key → the points of its stored prefix
        self.tested: dict[str, str] = {}  # tests read (ahead, :meth:`_prefetch`) or computed: their JSON

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
            _write(self.pending)

    def _read(self, sql: str, keys: list[str]) -> list[tuple]:
        if self.con is None or not keys:
            return []
        try:
            return self.con.execute(sql, [keys]).fetchall()  # a list of keys, or one key
        except duckdb.Error:
            return []  # an older cache without the table

    def summarize_series(
        self, series: list[list[list[float]]], resamples: int = stats.RESAMPLES
    ) -> list[list[stats.Summary]]:
        """:func:`stats.summarize_many` of each series' points (``series[i][point]``: its runs' values),
        read back for a series summarized before, and for the points of its longest stored prefix."""
        keys = [series_key(runs, resamples) for runs in series]
        found = self._summaries(keys)
        first = {key: i for i, key in reversed(list(enumerate(keys)))}  # two cells may hold the same values
        prefixes: dict[int, list[str]] = {
            i: _prefix_keys(series[i], resamples)[:-1] for key, i in first.items() if key not in found
        }
        stored = self._summaries([k for ks in prefixes.values() for k in ks])
        todo: list[tuple[int, int]] = []  # (series, its first point to compute)
        for i, ks in prefixes.items():
            have = max((k for k, key in enumerate(ks, 1) if key in stored), default=0)
            found[keys[i]] = stored[ks[have - 1]] if have else []
            todo.append((i, have))
            if have:
                self.pending["replaced"].append((ks[have - 1],))
                self.grown[keys[i]] = have
        computed = iter(stats.summarize_many([p for i, start in todo for p in series[i][start:]], resamples))
        for i, start in todo:
            found[keys[i]] = found[keys[i]] + [next(computed) for _ in series[i][start:]]
            done = found[keys[i]]
            self.pending["series_summaries"].append((keys[i], *([getattr(x, f) for x in done] for f in _FIELDS)))
        return [found[k] for k in keys]

    def _summaries(self, keys: list[str]) -> dict[str, list[stats.Summary]]:
        return {
            key: [stats.Summary(*p) for p in zip(*cols)]
            for key, *cols in self._read(
                f"SELECT key, {', '.join(_FIELDS)} FROM series_summaries WHERE key IN (SELECT unnest(?::VARCHAR[]))",
                keys,
            )
        }

    def tests(self, asked: list[tuple], test_many, read: list[bool] | None = None) -> list:
        """``test_many(asked)`` (trend.shown_many: (before, after, better, margin_pct) → Comparison | None)
        of each test, read back when these runs were tested so before (read ahead by :meth:`_prefetch`,
        else in one query for the tests whose ``read`` is true), the rest computed in one batch."""
        return self._answers([_test_key(*t) for t in asked], asked, test_many, read or [True] * len(asked))

    def _answers(self, keys: list[str], asked: list[tuple], test_many, read: list[bool]) -> list:
        unread = [k for k, r in zip(keys, read) if r and k not in self.tested]
        self.tested |= dict(
            self._read("SELECT key, value FROM comparisons WHERE key IN (SELECT unnest(?::VARCHAR[]))", unread)
        )
        new = {k: t for k, t in zip(keys, asked) if k not in self.tested}  # a test asked twice: computed once
        computed = dict(zip(new, test_many(list(new.values())))) if new else {}
        for key, result in computed.items():
            self.tested[key] = json.dumps(None if result is None else asdict(result))
            self.pending["comparisons"].append((key, self.tested[key]))
        return [computed[k] if k in computed else _comparison(json.loads(self.tested[k])) for k in keys]

    def _segments(self, requests: list) -> tuple[list[str], list]:
        """The keys and answers of each segmentation request (changepoints.SegmentTest: one window's
        boundaries and their p, of some medians): read back when asked of these medians before, else
        computed (and kept)."""
        keys = [_key("segments", list(r.medians), r.alpha) for r in requests]
        unread = [k for k in keys if k not in self.tested]
        self.tested |= dict(
            self._read("SELECT key, value FROM comparisons WHERE key IN (SELECT unnest(?::VARCHAR[]))", unread)
        )
        for key, request in zip(keys, requests):
            if key not in self.tested:
                self.tested[key] = json.dumps(request.answer())
                self.pending["comparisons"].append((key, self.tested[key]))
        return keys, [json.loads(self.tested[k]) for k in keys]

    def many(self, steps, series: list[tuple], test_many) -> list:
        """What ``steps(runs, medians, full_latest)`` (trend.change_steps) finds of each series
        (``series[i]``: runs, medians, better, margin_pct, full_latest), its tests (before, after,
        full, or a list of them) answered by :meth:`tests`: read back in one query for the series whose runs are what
        they were (a finished history); the others advance together, each round's new tests
        computed in one batch by ``test_many``."""
        keys = [
            series_key(runs, better, margin_pct, full, stats.RESAMPLES) for runs, _, better, margin_pct, full in series
        ]
        found = {
            k: _found(json.loads(v))
            for k, v in self._read(
                "SELECT key, value FROM series_changes WHERE key IN (SELECT unnest(?::VARCHAR[]))", keys
            )
        }
        todo = {key: args for key, args in zip(keys, series) if key not in found}  # a key once
        self._prefetch(list(todo.values()))
        # A series grown by a night had its earlier tests read ahead: the rest are new, not looked up one by one.
        read = {key: series_key(runs, stats.RESAMPLES) not in self.grown for key, (runs, *_) in todo.items()}
        running = {key: (steps(runs, medians, full), None) for key, (runs, medians, _, _, full) in todo.items()}
        asked: dict[str, list[str]] = {key: [] for key in todo}
        several: dict[str, bool] = {}
        while running:  # a round: every unfinished series asks its next test
            waiting, splits = [], []
            for key, (gen, answer) in list(running.items()):
                try:
                    request = gen.send(answer)
                except StopIteration as done:
                    found[key] = done.value
                    del running[key]
                    continue
                if hasattr(request, "medians"):  # changepoints.SegmentTest: answers itself
                    splits.append((key, request))
                    continue
                _, _, better, margin_pct, _ = todo[key]
                several[key] = isinstance(request, list)  # several tests at once, answered with a list
                for before, after, full in request if several[key] else [request]:
                    waiting.append((key, (before, after, better, margin_pct, full)))
            for (key, _), split_key, p in zip(splits, *self._segments([m for _, m in splits])):
                asked[key].append(split_key)
                running[key] = (running[key][0], p)
            tests = [t for _, t in waiting]
            test_keys = [_test_key(*t) for t in tests]
            answers = self._answers(test_keys, tests, test_many, [read[key] for key, _ in waiting])
            replies: dict[str, list] = {}
            for (key, _), test_key, answer in zip(waiting, test_keys, answers):
                asked[key].append(test_key)
                replies.setdefault(key, []).append(answer)
            for key, got in replies.items():
                running[key] = (running[key][0], got if several[key] else got[0])
        for key in todo:
            self.pending["series_changes"].append((key, json.dumps(_found_json(found[key]))))
            self.pending["series_tests"].append((key, asked[key]))
        return [found[k] for k in keys]

    def _prefetch(self, series: list[tuple]) -> None:
        """The tests the nights before asked for (a series grown by a night, :meth:`summarize_series`),
        read in two queries rather than one a test: most of them are asked again."""
        before = [
            series_key(runs[: self.grown[k]], better, margin_pct, full, stats.RESAMPLES)
            for runs, _, better, margin_pct, full in series
            if (k := series_key(runs, stats.RESAMPLES)) in self.grown
        ]
        asked = [
            k
            for (tests,) in self._read(
                "SELECT tests FROM series_tests WHERE key IN (SELECT unnest(?::VARCHAR[]))", before
            )
            for k in tests
        ]
        self.tested |= dict(
            self._read("SELECT key, value FROM comparisons WHERE key IN (SELECT unnest(?::VARCHAR[]))", asked)
        )


def _found_json(found) -> dict:
    return {
        "changes": [(i, asdict(c), *rest) for i, c, *rest in found.changes],
        "latest": None if found.latest is None else asdict(found.latest),
        "standing": None if found.standing is None else asdict(found.standing),
    }


def _found(data: dict) -> "Found":
    return Found(
        [(i, _comparison(c), *rest) for i, c, *rest in data["changes"]],
        _comparison(data["latest"]),
        _comparison(data.get("standing")),
    )


def _comparison(data: dict | None) -> stats.Comparison | None:
    if data is None:
        return None
    return stats.Comparison(
        **{**data, "baseline": stats.Summary(**data["baseline"]), "contender": stats.Summary(**data["contender"])}
    )


def _write(pending: dict[str, list[tuple]]) -> None:
    """The computed rows of each table, in one connection and one transaction."""
    if not any(pending.values()):
        return
    try:
        path().parent.mkdir(parents=True, exist_ok=True)
        with duckdb.connect(str(path())) as con:
            con.execute(_SCHEMA)
            con.execute("BEGIN TRANSACTION")
            for table, rows in pending.items():
                if not rows:
                    continue
                if table == "replaced":  # a prefix's row, superseded by the longer series' row just stored
                    con.execute(
                        "DELETE FROM series_summaries WHERE key IN (SELECT unnest(?::VARCHAR[]))",
                        [[k for (k,) in rows]],
                    )
                    continue
                # a key once (two cells may hold the same values)
                columns = list(zip(*{r[0]: r for r in rows}.values()))
                unnest = ", ".join(f"unnest(?) AS c{i}" for i in range(len(columns)))
                con.execute(f"INSERT OR IGNORE INTO {table} SELECT {unnest}", [list(c) for c in columns])
            con.execute("COMMIT")
    except (duckdb.Error, OSError):
        pass  # another process holds the file: the next run stores them

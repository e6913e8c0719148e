"""What the ``replay`` workload sends, read from a captured profile (engine/replay/capture.py).

A profile holds one row per task the fleet ran: its name, queue, send / start / finish times,
runtime, args and kwargs sizes, parent and root ids. This module turns it into :class:`Unit` s,
each sent by the driver at its intended offset from the run's clock: a single task (with the
tasks it spawned, sent by it when it ends) or a chord (a header group and a body).

Events carry no group id: a chord's header members look like independent tasks and its body like
a child of the header member that finished last, as a chain's next task is a child of the one
before. What tells them apart is the child's args: a chord's body receives its header's results as
a list leading its args, a chain's next task one result (``args_lead_list``, which cmx capture reads
off the events' argsrepr). A child whose args lead with a list of n >= 2 items is a chord's body when
the tightest run of n root tasks around its parent in send order (within ``CHORD_SPAN_S``) spawned
nothing else and all finished before it was sent, the parent last (Celery sends a chord's body from
the header member that ends last); any other child is a chain's next task. Profiles written before that column (and
bodies whose repr Celery cut short) fall back on timing alone: the parent in one tight burst of
root tasks (gaps at most ``CHORD_GAP_S``), where steady traffic of more than a few tasks a second
makes a plain chain read as a chord.

``fitted`` mode replaces the recorded sequence by one drawn per task name: Poisson arrivals at
the captured rate (the inter-arrival gaps fitted by ``scipy.stats.expon``) times ``rate``, and
runtimes from a log-normal fitted by ``scipy.stats.lognorm`` (a constant when all are equal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

#: Largest gap (seconds) between two sends of one chord's header, as one producer call sends it
#: (a first call's connection set-up showed 65 ms), and the longest a header's sending may last.
CHORD_GAP_S = 0.1
CHORD_SPAN_S = 1.0
#: Celery's own tasks (chord_unlock, backend_cleanup): replaying the canvas recreates them.
CELERY_OWN = "celery."
_COLUMNS = (
    "uuid",
    "name",
    "queue",
    "sent",
    "received",
    "started",
    "succeeded",
    "failed",
    "runtime",
    "parent_id",
    "args_bytes",
    "kwargs_bytes",
)


@dataclass
class Call:
    """One task to run: its recorded name, queue, runtime and payload size, and what it sends when done."""

    name: str
    queue: str | None
    runtime: float
    payload_bytes: int
    children: list["Call"] = field(default_factory=list)

    def count(self) -> int:
        return 1 + sum(c.count() for c in self.children)

    def as_spec(self) -> dict:
        """What travels in a parent's message so its worker can send this call."""
        return {
            "name": self.name,
            "queue": self.queue,
            "runtime": self.runtime,
            "payload_bytes": self.payload_bytes,
            "children": [c.as_spec() for c in self.children],
        }

    @classmethod
    def from_spec(cls, spec: dict) -> "Call":
        return cls(
            spec["name"],
            spec.get("queue"),
            float(spec["runtime"]),
            int(spec["payload_bytes"]),
            [cls.from_spec(c) for c in spec.get("children") or ()],
        )


@dataclass
class Unit:
    """What the driver sends at ``at`` seconds after the clock: ``calls`` (one, or a chord's header) and ``body``."""

    at: float
    calls: list[Call]
    body: Call | None = None

    def count(self) -> int:
        return sum(c.count() for c in self.calls) + (self.body.count() if self.body else 0)


def resolve(profile: str, folders: list[Path]) -> Path:
    """The profile file: ``profile`` relative to the first folder that has it (the experiment's
    on the controller), else its bare name in a folder (as shipped to the hosts)."""
    for folder in folders:
        for candidate in (Path(folder) / profile, Path(folder) / Path(profile).name):
            if candidate.is_file():
                return candidate
    raise FileNotFoundError(f"no profile {profile} (looked in {', '.join(str(f) for f in folders)})")


def arrival_sql(con, path: str) -> tuple[str, str]:
    """SQL for a task's arrival time and its source in the profile at ``path``: its columns ``arrival`` and
    ``arrival_source`` (cmx capture writes them), else, in a profile written before them, the send,
    else the receipt, else the start."""
    cols = {r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()}
    if {"arrival", "arrival_source"} <= cols:
        return "arrival", "arrival_source"
    return (
        "coalesce(sent, received, started)",
        "CASE WHEN sent IS NOT NULL THEN 'sent' WHEN received IS NOT NULL THEN 'received' "
        "WHEN started IS NOT NULL THEN 'started' END",
    )


def read_rows(path: Path) -> list[dict]:
    """The profile's rows in arrival order (DuckDB reads the Parquet); ValueError when it is not a profile."""
    import duckdb

    con = duckdb.connect()
    try:
        arrival, source = arrival_sql(con, str(path))
        cols = {r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()}
        extra = ("args_lead_list",) if "args_lead_list" in cols else ()  # profiles before it: timing alone
        cur = con.execute(
            f"SELECT {', '.join((*_COLUMNS, *extra))}, {arrival} AS arrival, {source} AS arrival_source "
            f"FROM read_parquet(?) WHERE name IS NOT NULL AND {arrival} IS NOT NULL "
            f"ORDER BY {arrival}",
            [str(path)],
        )
        return [dict(zip((*_COLUMNS, *extra, "arrival", "arrival_source"), r)) for r in cur.fetchall()]
    except duckdb.Error as exc:
        raise ValueError(f"{path}: not a cmx profile ({str(exc).splitlines()[0]})") from None
    finally:
        con.close()


def arrival_note(rows: list[dict]) -> str | None:
    """What the run's notes say when arrivals were not all read from task-sent events."""
    other = sum(1 for r in rows if r.get("arrival_source") not in (None, "sent"))
    if not other:
        return None
    return (
        f"arrivals of {other:,} of {len(rows):,} recorded tasks are their workers' receipts (task-received; "
        "captured without task_send_sent_event or with --arrivals received): the wait in the queue before "
        "reception is not in the replayed arrivals"
    )


def queue_suffix(queue: str) -> str:
    """A recorded queue's name as the suffix of the run's queue that replays it (``cmx.<run>.q.<name>``)."""
    return "q." + re.sub(r"[^A-Za-z0-9_.-]", "_", queue)[:120]


def recorded_queues(rows: list[dict], names: list[str] | None = None) -> list[str]:
    """The queues the replayed names were recorded on."""
    keep = set(task_names(rows, names))
    return sorted({r["queue"] for r in rows if r["name"] in keep and r["queue"]})


def route(units: list[Unit], run_queue: str) -> None:
    """Point every call at the run's queue for its recorded one (``<run queue>.<queue_suffix>``),
    or at the run's own queue when none was recorded."""

    def walk(call: Call) -> None:
        call.queue = f"{run_queue}.{queue_suffix(call.queue)}" if call.queue else run_queue
        for child in call.children:
            walk(child)

    for unit in units:
        for call in [*unit.calls, *([unit.body] if unit.body else [])]:
            walk(call)


def task_names(rows: list[dict], names: list[str] | None = None) -> list[str]:
    """The names the run replays: the recorded ones (or ``names`` among them), Celery's own left out."""
    recorded = sorted({r["name"] for r in rows if not r["name"].startswith(CELERY_OWN)})
    return [n for n in recorded if names is None or n in names]


def _runtime(row: dict) -> float:
    if row["runtime"] is not None:
        return max(float(row["runtime"]), 0.0)
    end = row["succeeded"] or row["failed"]
    return max(end - row["started"], 0.0) if end and row["started"] else 0.0


def _call(row: dict) -> Call:
    return Call(row["name"], row["queue"], _runtime(row), int(row["args_bytes"] or 0) + int(row["kwargs_bytes"] or 0))


def exact(rows: list[dict], names: list[str] | None = None, speed: float = 1.0) -> list[Unit]:
    """The recorded sequence: each root task at its recorded offset / ``speed``, its children
    nested in it, chords inferred (module docstring)."""
    keep = set(task_names(rows, names))
    rows = [r for r in rows if r["name"] in keep]
    by_id = {r["uuid"]: r for r in rows}
    calls = {r["uuid"]: _call(r) for r in rows}
    kids: dict[str, list[dict]] = {}
    for r in rows:
        if r["parent_id"] in by_id:
            kids.setdefault(r["parent_id"], []).append(r)
    roots = [r for r in rows if r["parent_id"] not in by_id]
    chords = _chords(roots, kids)
    in_chord = {m["uuid"] for header, _ in chords.values() for m in header}
    for parent, children in kids.items():
        calls[parent].children = [calls[c["uuid"]] for c in children if c["uuid"] not in chords]
    t0 = _sent(rows[0]) if rows else 0.0
    units = []
    for r in roots:
        if r["uuid"] in in_chord:
            continue
        units.append(Unit((_sent(r) - t0) / speed, [calls[r["uuid"]]]))
    for body_id, (header, _) in chords.items():
        units.append(Unit((_sent(header[0]) - t0) / speed, [calls[m["uuid"]] for m in header], calls[body_id]))
    return sorted(units, key=lambda u: u.at)


def _names(call: Call) -> set[str]:
    return {call.name}.union(*(_names(c) for c in call.children))


def unit_names(unit: Unit) -> set[str]:
    """Every task name a unit sends: its calls', their children's, its body's."""
    return set().union(*(_names(c) for c in [*unit.calls, *([unit.body] if unit.body else [])]))


#: Seconds between the units a limit adds after its first N (so a smoke ends in seconds, not at their recorded time).
ADDED_GAP_S = 0.01


def limited(units: list[Unit], limit: int | None) -> tuple[list[Unit], list[str]]:
    """The first ``limit`` units (all when None), then the first unit of each task name they leave
    out, each sent ``ADDED_GAP_S`` after the one before (a smoke replays every task name at least
    once, in seconds); and those names, which the run's notes say."""
    if limit is None or limit >= len(units):
        return units, []
    kept = units[:limit]
    seen = set().union(*map(unit_names, kept)) if kept else set()
    added_names: list[str] = []
    at = kept[-1].at if kept else 0.0
    for unit in units[limit:]:
        new = unit_names(unit) - seen
        if not new:
            continue
        at += ADDED_GAP_S
        kept.append(Unit(at, unit.calls, unit.body))
        seen |= new
        added_names += sorted(new)
    return kept, added_names


def _sent(row: dict) -> float:
    """When the task arrived: the profile's ``arrival`` (read_rows), else its send, else (producers
    without task_send_sent_event) its receipt."""
    for key in ("arrival", "sent", "received", "started"):
        if row.get(key) is not None:
            return row[key]
    return 0.0


def _chords(roots: list[dict], kids: dict[str, list[dict]]) -> dict[str, tuple[list[dict], dict]]:
    """{body id: (header rows, parent row)} for every child that reads as a chord's body (module docstring)."""
    roots = sorted(roots, key=_sent)
    order = {r["uuid"]: i for i, r in enumerate(roots)}
    times = [_sent(r) for r in roots]
    found: dict[str, tuple[list[dict], dict]] = {}
    taken: set[str] = set()
    for parent_id, children in kids.items():
        if parent_id not in order or len(children) != 1 or parent_id in taken:
            continue
        child, parent = children[0], roots[order[parent_id]]
        sent = _sent(child)

        def member(r):
            end = r["succeeded"] or r["failed"]
            return r["uuid"] not in kids and r["uuid"] not in taken and end is not None and end <= sent + 1e-3

        if "args_lead_list" in child:
            header = _header_by_size(child.get("args_lead_list"), parent, roots, times, member)
        else:
            header = _header_by_timing(order[parent_id], roots, member)
        if header is None:
            continue
        last = max(header, key=lambda r: r["succeeded"] or r["failed"])
        # Celery's chord body is sent by the header member that ends last: anything else is a chain.
        if len(header) >= 2 and last is parent and _sent(header[-1]) - _sent(header[0]) <= CHORD_SPAN_S:
            found[child["uuid"]] = (header, parent)
            taken.update(m["uuid"] for m in header)
    return found


def _header_by_size(size: int | None, parent: dict, roots: list[dict], times: list[float], member) -> list[dict] | None:
    """The tightest run of ``size`` roots in send order that holds the parent, among the parent and the
    member roots sent within CHORD_SPAN_S of it (one producer call sends a header's members one after
    another); None when the child's args do not lead with a list of at least 2 or too few roots exist."""
    if size is None or size < 2:
        return None
    import bisect

    at = _sent(parent)
    window = roots[bisect.bisect_left(times, at - CHORD_SPAN_S) : bisect.bisect_right(times, at + CHORD_SPAN_S)]
    near = [r for r in window if r is parent or member(r)]
    k = next(i for i, r in enumerate(near) if r is parent)  # roots are in send order
    starts = range(max(0, k - size + 1), min(k, len(near) - size) + 1)
    best = min(starts, key=lambda i: _sent(near[i + size - 1]) - _sent(near[i]), default=None)
    return None if best is None else near[best : best + size]


def _header_by_timing(at: int, roots: list[dict], member) -> list[dict]:
    """The parent's tight burst of member roots (gaps at most CHORD_GAP_S), in send order."""
    i = j = at
    while i > 0 and member(roots[i - 1]) and _sent(roots[i]) - _sent(roots[i - 1]) <= CHORD_GAP_S:
        i -= 1
    while j + 1 < len(roots) and member(roots[j + 1]) and _sent(roots[j + 1]) - _sent(roots[j]) <= CHORD_GAP_S:
        j += 1
    return roots[i : j + 1]


def fitted(
    rows: list[dict], names: list[str] | None = None, speed: float = 1.0, rate: float = 1.0, seed: int = 0
) -> tuple[list[Unit], dict[str, dict]]:
    """Per name, arrivals and runtimes drawn from what was fitted to the capture (module docstring),
    over the recorded span / ``speed``. Returns the units and, per name, what was fitted."""
    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(seed)
    keep = task_names(rows, names)
    start = min((_sent(r) for r in rows), default=0.0)
    span = max((_sent(r) for r in rows), default=0.0) - start
    units, fits = [], {}
    for name in keep:
        mine = [r for r in rows if r["name"] == name]
        times = np.array(sorted(_sent(r) for r in mine))
        gaps = np.diff(times)
        scale = stats.expon.fit(gaps, floc=0)[1] if len(gaps) and gaps.mean() > 0 else max(span, 1e-3)
        lam = rate / scale
        runtimes = np.array([_runtime(r) for r in mine])
        draw, fit = _runtime_model(runtimes, stats, rng)
        sizes = [int(r["args_bytes"] or 0) + int(r["kwargs_bytes"] or 0) for r in mine]
        n = int(rng.poisson(lam * max(span, scale)))
        at = np.sort(rng.uniform(0, max(span, scale), n))
        queue = mine[0]["queue"]
        for t, rt, size in zip(at, draw(n), rng.choice(sizes, n)):
            units.append(Unit(float(t) / speed, [Call(name, queue, float(rt), int(size))]))
        fits[name] = {"rate_per_s": lam, "runtime": fit, "tasks": n}
    return sorted(units, key=lambda u: u.at), fits


def _runtime_model(runtimes, stats, rng):
    """A sampler of runtimes and what it is: log-normal fitted to them, or their constant value."""
    positive = runtimes[runtimes > 0]
    if len(positive) < 2 or positive.min() == positive.max():
        value = float(positive[0]) if len(positive) else 0.0
        return (lambda n: [value] * n), {"dist": "constant", "value": value}
    shape, loc, scale = stats.lognorm.fit(positive, floc=0)
    dist = stats.lognorm(shape, loc=loc, scale=scale)
    return (lambda n: dist.rvs(size=n, random_state=rng)), {"dist": "lognorm", "s": shape, "scale": scale}

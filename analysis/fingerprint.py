"""The environment fingerprint of a run: what, beside the cell, decides its numbers. The one list
``cmx compare`` and ``cmx trend`` read to warn when the runs they set side by side ran on
different environments.

Facts: the versions of :data:`cmx.workloads.runtime.fingerprint.PACKAGES` as the worker and driver
processes reported them (table ``packages``), and per host (table ``hosts``) the broker's and the
backend's server versions, the kernel, Python, the CPU model, its frequency governor and its cores.
A fact nobody recorded (runs stored before it was) is unknown, never a difference.
"""

from __future__ import annotations

from cmx.workloads.runtime.fingerprint import PACKAGES

#: The columns of ``hosts`` in the fingerprint, in the order warnings name them.
HOST_FACTS = ("broker_version", "backend_version", "kernel", "python", "cpu_model", "governor", "cores")
#: Every fact: the packages by name, then the host facts.
FACTS = (*PACKAGES, *HOST_FACTS)
#: The dimension that sets a fact on purpose: two sides that differ in it are meant to differ in
#: the fact (comparing broker=redis with broker=rabbitmq, the broker's server differs of course).
CHOSEN_BY = {"broker_version": "broker", "backend_version": "backend", **{p: f"package.{p}" for p in PACKAGES}}
#: A package a process reported but could not find.
ABSENT = "not installed"

Values = dict[str, set[str]]  # fact → its values (several when hosts or processes disagree)


def _columns(con, table: str) -> set[str]:
    return {
        c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ?", [table]).fetchall()
    }


def of_runs(con, run_ids) -> dict[str, Values]:
    """``{run_id: {fact: values}}`` of the given runs (a run with no fact recorded is left out)."""
    ids = list(run_ids)
    out: dict[str, Values] = {}
    host_cols = _columns(con, "hosts")
    cols = [c for c in HOST_FACTS if c in host_cols]
    # Runs stored before the packages table have celery and kombu from the host's facts only.
    old = [c for c in ("celery", "kombu") if c in host_cols]
    if cols or old:
        for row in con.execute(
            f"SELECT run_id, {', '.join(cols + old)} FROM hosts WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids]
        ).fetchall():
            facts = out.setdefault(row[0], {})
            for fact, value in zip(cols + [f"hosts.{c}" for c in old], row[1:]):
                if value is not None:
                    facts.setdefault(fact, set()).add(str(value))
    if _columns(con, "packages"):
        for run_id, name, version in con.execute(
            "SELECT run_id, name, version FROM packages WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids]
        ).fetchall():
            if name in PACKAGES:
                out.setdefault(run_id, {}).setdefault(name, set()).add(version or ABSENT)
    for facts in out.values():
        for c in old:
            fallback = facts.pop(f"hosts.{c}", None)
            if fallback and c not in facts:
                facts[c] = fallback
    return out


def chosen(con, a_ids, b_ids) -> set[str]:
    """The facts the two groups of runs differ in on purpose: those whose dimension
    (:data:`CHOSEN_BY`) has other values on one side than on the other."""
    dims = _columns(con, "runs")
    out = set()
    for fact, dim in CHOSEN_BY.items():
        if dim not in dims:
            continue
        a, b = (
            {
                v
                for (v,) in con.execute(
                    f'SELECT DISTINCT "{dim}" FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[]))', [list(ids)]
                ).fetchall()
            }
            for ids in (a_ids, b_ids)
        )
        if a != b:
            out.add(fact)
    return out


def merged(per_run: dict[str, Values], run_ids) -> Values:
    """The facts of several runs together (the union of each fact's values)."""
    out: Values = {}
    for run_id in run_ids:
        for fact, values in per_run.get(run_id, {}).items():
            out.setdefault(fact, set()).update(values)
    return out


def shown(values: set[str]) -> str:
    return ", ".join(sorted(values, key=str))


def differences(a: Values, b: Values, skip: set[str] = frozenset()) -> list[tuple[str, set[str], set[str]]]:
    """(fact, values of a, values of b) of each fact both know and that differs, in FACTS order
    (``skip``: facts the sides differ in on purpose, see :func:`chosen`)."""
    return [(f, a[f], b[f]) for f in FACTS if f not in skip and a.get(f) and b.get(f) and a[f] != b[f]]


def changes(points: list[tuple[str, Values]]) -> list[str]:
    """One line per fact that changes along ``points`` ((label, facts) in order), naming each change
    and the point it starts at: ``celery 5.5.3 → 5.7.0 from sweep X on``. A point that does not know
    a fact is skipped for it."""
    lines = []
    for fact in FACTS:
        steps, last = [], None
        for label, facts in points:
            now = facts.get(fact)
            if not now:
                continue
            if last is not None and now != last:
                steps.append(f"{shown(last)} → {shown(now)} from {label} on")
            last = now
        if steps:
            lines.append(f"{fact} " + "; ".join(steps))
    return lines

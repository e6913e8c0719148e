"""Scale: ingest at 1M task rows (≤ 2 s) and ``cmx report`` over 1M task rows (≤ 5 s), in one run.

    python benchmarks/scale.py [--tasks 1000000] [--runs 50] [--run-tasks 20000] [--before REF] [--rounds N]

1. A results database of ``--runs`` runs holding ``--tasks`` task rows in all is filled with DuckDB
   SQL (tests/benchmarks/bench_report.py's ``fill``); ``cmx report`` is timed over it (the CLI's
   wall time, process start included).
2. A run's artifacts are written as the hosts write them (``pub``, ``recv`` and four
   ``exec-PID.csv`` files, the recorder's CSV layout) and ``ingest_run`` is timed: a run of
   ``--run-tasks`` tasks into the database of step 1 (target ≤ 2 s: ingest must not grow with
   the database), and, as a stress figure, one run of ``--tasks`` tasks into an empty database
   and into the database of step 1.

``--before REF`` also times that commit's ``cmx report`` on the same database (its tree from ``git
archive``, as benchmarks/cells100.py does), the two in turn ``--rounds`` times so both see the same
load, and prints each side's median wall and CPU seconds and the ratio after / before of each
round's CPU seconds (median, min-max): on a shared machine CPU seconds move much less than wall time.

Printed: each figure's wall time, the CPU seconds it used (all threads; on a busy machine wall
time grows, CPU time much less), its target and wall / target (≤ 1 is met). Exit status 1 when
a target is missed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cmx.engine.results import db  # noqa: E402
from cmx.engine.results.ingest import HostInfo, ingest_run  # noqa: E402
from cmx.workloads.runtime.recorder import HEADERS  # noqa: E402
from tests.benchmarks.bench_report import fill  # noqa: E402

INGEST_TARGET_S, REPORT_TARGET_S = 2.0, 5.0
T0 = 1_700_000_000.0
EXEC_FILES = 4  # a prefork worker with concurrency 4: one exec file per child


def write_artifacts(art: Path, tasks: int) -> None:
    """``art/<run>/w1/`` as the hosts leave it: every task published, received and run once."""
    import duckdb

    host = art / "w1"
    host.mkdir(parents=True)
    con = duckdb.connect()
    con.execute(f"CREATE TABLE g AS SELECT g, uuid()::VARCHAR AS id FROM range({tasks}) t(g)")
    queries = {
        "pub-100.csv": f"SELECT id, 'cmx.throughput.noop', 'w1', 100, NULL, {T0} + g * 1e-5 FROM g",
        "recv-200.csv": f"SELECT id, 'w1', 200, {T0} + g * 1e-5 + 0.01 FROM g",
    }
    for i in range(EXEC_FILES):
        queries[f"exec-{201 + i}.csv"] = (
            f"SELECT id, 'cmx.throughput.noop', 'w1', {201 + i}, {T0} + g * 1e-5, {T0} + g * 1e-5 + 0.02, "
            f"{T0} + g * 1e-5 + 0.021, 'SUCCESS', 0 FROM g WHERE g % {EXEC_FILES} = {i}"
        )
    for name, q in queries.items():
        kind = name.split("-")[0]
        names = ", ".join(f"c{j} AS {h}" for j, h in enumerate(HEADERS[kind]))
        cols = ", ".join(f"c{j}" for j in range(len(HEADERS[kind])))
        con.execute(
            f"COPY (SELECT {names} FROM (SELECT * FROM ({q}) AS s({cols}))) TO '{host / name}' (HEADER, DELIMITER ',')"
        )
    con.close()


def time_ingest(path: Path, art: Path, run_id: str, tasks: int) -> tuple[float, float]:
    with db.connect(path) as con:
        started, cpu = time.perf_counter(), time.process_time()
        ingest_run(con, run_id, art, 0.0, {"w1": HostInfo(groups=("workers",))})
        took, cpu = time.perf_counter() - started, time.process_time() - cpu
        n = con.execute("SELECT count(*) FROM tasks WHERE run_id = ?", [run_id]).fetchone()[0]
    if n != tasks:
        sys.exit(f"ingested {n} task rows of {run_id}, expected {tasks}")
    return took, cpu


def line(what: str, took: float, cpu: float, target: float | None) -> bool:
    verdict = (
        ""
        if target is None
        else (f"target {target:.0f} s   ratio {took / target:4.2f}  {'met' if took <= target else 'MISSED'}")
    )
    print(f"  {what:<58} {took:6.2f} s  (cpu {cpu:5.2f} s)   {verdict}")
    return target is None or took <= target


def children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def report_rounds(big: Path, tmp: Path, before: str | None, rounds: int) -> tuple[float, float]:
    """``cmx report`` over ``big``, ``rounds`` times (with ``before``: that commit's too, in turn);
    this checkout's median wall and CPU seconds. Prints the side by side when ``before`` is given."""
    import statistics

    from benchmarks.cells100 import checkout, timed_cli

    old = checkout(before, tmp / "before") if before else None
    was, now = [], []
    for _ in range(max(1, rounds)):
        if old is not None:
            was.append(
                timed_cli("report", "big", "--db", str(big), "--out", str(tmp / "out-before"), pythonpath=old)[:2]
            )
        now.append(timed_cli("report", "big", "--db", str(big), "--out", str(tmp / "out"))[:2])
    med = lambda runs, i: statistics.median(r[i] for r in runs)  # noqa: E731
    if was:
        ratios = sorted(n[1] / w[1] for w, n in zip(was, now))
        print(f"cmx report, {len(now)} rounds in turn, before {before} / after this checkout (median of the rounds):")
        print(
            f"  before: wall {med(was, 0):6.2f} s  cpu {med(was, 1):5.2f} s   "
            f"after: wall {med(now, 0):6.2f} s  cpu {med(now, 1):5.2f} s   "
            f"cpu after/before per round: median {statistics.median(ratios):4.2f} "
            f"({ratios[0]:4.2f}-{ratios[-1]:4.2f})"
        )
    return med(now, 0), med(now, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--run-tasks", type=int, default=20_000, help="tasks of the run ingested into the big database")
    ap.add_argument("--before", metavar="REF", help="also time this git commit's cmx report, in turn")
    ap.add_argument("--rounds", type=int, default=1, help="time cmx report this many times (median)")
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="cmx-scale-") as tmp:
        tmp = Path(tmp)
        big = tmp / "big.duckdb"
        t = time.perf_counter()
        fill(big, args.runs, args.tasks)
        print(f"filled a database of {args.runs} runs, {args.tasks:,} task rows in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        write_artifacts(tmp / "artifacts" / "big-run", args.tasks)
        write_artifacts(tmp / "artifacts" / "run", args.run_tasks)
        print(
            f"wrote the artifacts of two runs, {args.tasks:,} and {args.run_tasks:,} tasks (pub, recv, "
            f"{EXEC_FILES} exec files) in {time.perf_counter() - t:.1f} s"
        )
        took, cpu = report_rounds(big, tmp, args.before, args.rounds)
        print(f"database of {args.tasks:,} task rows:")
        ok &= line(f"cmx report over its {args.runs} runs (process start incl.)", took, cpu, REPORT_TARGET_S)
        ok &= line(
            f"ingest of a {args.run_tasks:,}-task run into it",
            *time_ingest(big, tmp / "artifacts" / "run", "run", args.run_tasks),
            INGEST_TARGET_S,
        )
        print(f"stress: one run of {args.tasks:,} tasks:")
        line(
            "ingest into an empty database",
            *time_ingest(tmp / "empty.duckdb", tmp / "artifacts" / "big-run", "big-run", args.tasks),
            None,
        )
        line(
            f"ingest into the database of {args.tasks:,} task rows",
            *time_ingest(big, tmp / "artifacts" / "big-run", "big-run", args.tasks),
            None,
        )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""Travel: ``cmx export`` and ``cmx import`` of a sweep of 1M task rows (import target ≤ 5 s).

    python benchmarks/travel.py [--runs 200] [--run-tasks 5000]

1. A results database holding one sweep of ``--runs`` runs × ``--run-tasks`` tasks (1M task rows
   by default, with samples, connections, queue depth and metrics) is filled in bulk
   (tests/results_fixture.py's ``build_grid``; each task given a uuid and stamps that differ, as
   a real run's), then a second night of the same experiment: the same rows under another sweep
   id and other run ids.
2. Timed through the CLI, as a user runs them (process start included): ``cmx export`` of the
   first night, and of both; ``cmx import`` of it into an empty database (target 5 s); ``cmx import`` of it
   again (every sweep already there: skipped); and ``cmx import`` of the second night into the
   database that now holds the first (a nightly merge into a growing database; target 5 s).

Printed: each figure's wall time, the CPU seconds of the cmx process, the target and whether it
was met. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cmx.engine.results import db, travel  # noqa: E402
from tests.results_fixture import GRID_CONCURRENCY, GRID_POOLS, build_grid  # noqa: E402

IMPORT_TARGET_S = 5.0
CMX = [str(Path(sys.executable).with_name("cmx"))]


def build(path: Path, runs: int, run_tasks: int) -> None:
    """``runs`` runs (2 brokers × pools × concurrency × 2 repeats, cut to fit) of one sweep, s1."""
    cells = runs // 2  # repeats
    pools = GRID_POOLS[: max(1, min(len(GRID_POOLS), cells // (2 * len(GRID_CONCURRENCY))))]
    conc = GRID_CONCURRENCY[: max(1, cells // (2 * len(pools)))]
    build_grid(path, experiment="nightly", repeats=2, tasks_per_run=run_tasks, pools=pools, concurrency=conc)
    with db.connect(path) as con:
        # As a real run's rows: a uuid per task and stamps that differ (Parquet compresses the
        # grid's repeated ids and round numbers far better than it would a night's tasks).
        con.execute(
            "UPDATE tasks SET task_id = uuid()::VARCHAR, sent_at = sent_at + random() * 1e-3, "
            "received_at = received_at + random() * 1e-3, started_at = started_at + random() * 1e-3, "
            "finished_at = finished_at + random() * 1e-2, pid = 100 + (random() * 4)::INTEGER"
        )
        db.record_sweep(
            con,
            "s1",
            "nightly",
            "nightly.yaml",
            "throughput",
            "",
            "inventory/local.yml",
            {"name": "nightly"},
            provenance={"cmx_version": "bench"},
        )


def second_night(path: Path) -> None:
    """The same rows again as sweep s2 with other run ids (another night of the experiment)."""
    with db.connect(path) as con:
        con.execute("BEGIN")
        for table, key in travel.keyed_tables(con).items():
            cols = [
                c
                for (c,) in con.execute(
                    "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index", [table]
                ).fetchall()
            ]
            new = ", ".join({"sweep_id": "'s2'", "run_id": "'n2-' || run_id"}.get(c, f'"{c}"') for c in cols)
            con.execute(
                f'INSERT INTO "{table}" SELECT {new} FROM "{table}" WHERE '
                f'"{key}" IN (SELECT {key} FROM {"sweeps" if key == "sweep_id" else "run_starts"})'
            )
        con.execute("COMMIT")


def timed(*args: str) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([*CMX, *args], capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"cmx {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return took, cpu, proc.stdout.strip().splitlines()[-1]


def line(what: str, took: float, cpu: float, target: float | None) -> bool:
    verdict = "" if target is None else f"target {target:.0f} s  {'met' if took <= target else 'MISSED'}"
    print(f"  {what:<52} {took:6.2f} s  (cpu {cpu:5.2f} s)   {verdict}")
    return target is None or took <= target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--run-tasks", type=int, default=5000)
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="cmx-travel-") as tmp:
        tmp = Path(tmp)
        started = time.perf_counter()
        build(tmp / "lab.duckdb", a.runs, a.run_tasks)
        with db.connect(tmp / "lab.duckdb", read_only=True) as con:
            tasks = con.execute("SELECT count(*) FROM tasks").fetchone()[0]
            runs = con.execute("SELECT count(*) FROM run_starts").fetchone()[0]
        print(f"one sweep: {runs} runs, {tasks:,} task rows (built in {time.perf_counter() - started:.1f} s)")
        size = lambda p: sum(f.stat().st_size for f in p.iterdir()) / 1e6  # noqa: E731
        took, cpu, _ = timed("export", "nightly", "--out", str(tmp / "night1"), "--db", str(tmp / "lab.duckdb"))
        line(f"cmx export, one sweep ({size(tmp / 'night1'):.0f} MB Parquet)", took, cpu, None)
        second_night(tmp / "lab.duckdb")
        took, cpu, _ = timed("export", "nightly", "--out", str(tmp / "both"), "--db", str(tmp / "lab.duckdb"))
        line(f"cmx export, two sweeps ({size(tmp / 'both'):.0f} MB Parquet)", took, cpu, None)
        took, cpu, said = timed("import", str(tmp / "night1"), "--db", str(tmp / "central.duckdb"))
        ok &= line("cmx import of it into an empty database", took, cpu, IMPORT_TARGET_S)
        took, cpu, said = timed("import", str(tmp / "night1"), "--db", str(tmp / "central.duckdb"))
        ok &= line("cmx import of it again (skipped: already there)", took, cpu, IMPORT_TARGET_S)
        took, cpu, said = timed("import", str(tmp / "both"), "--db", str(tmp / "central.duckdb"))
        ok &= line("cmx import of both nights (adds the second)", took, cpu, IMPORT_TARGET_S)
        with db.connect(tmp / "central.duckdb", read_only=True) as con:
            n = con.execute("SELECT count(*) FROM tasks").fetchone()[0]
        if n != 2 * tasks:
            sys.exit(f"the merged database holds {n:,} task rows, expected {2 * tasks:,}")
        print(f"merged: {n:,} task rows, each sweep once")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

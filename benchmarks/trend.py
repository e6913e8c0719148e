"""``cmx trend`` over a year of nightly sweeps: 365 sweeps × 20 cells × 10 metrics (target ≤ 2 s).

    python benchmarks/trend.py [--sweeps 365] [--cells 20] [--metrics 10] [--repeats 3]

A results database is filled with DuckDB SQL (3 ok runs a cell a sweep, values with a few %
noise and a 20 % step in the middle of one metric's history), then ``cmx trend EXPERIMENT
--format json`` is timed as the user runs it (process start included), and, in process, its
parts: reading the runs, the points' intervals (``stats.summarize_many``, a scipy bootstrap of
2,000 resamples per point) and the change points. Printed: the figures, the target and wall /
target (≤ 1 is met), and the CPU seconds (on a busy machine wall time grows, CPU time much
less); exit status 1 when the target is missed.
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

from cmx.analysis import stats, trend as trend_mod  # noqa: E402
from cmx.analysis.views import connect  # noqa: E402
from cmx.engine.results import db, metricdefs  # noqa: E402

TARGET_S = 2.0


def fill(path: Path, sweeps: int, cells: int, metrics: int, repeats: int) -> None:
    names = [m for m in metricdefs.METRICS if metricdefs.METRICS[m].better.value != "neither"][:metrics]
    with db.connect(path) as con:
        db.record_run_start(con, experiment="seed", sweep_id="seed", run_id="seed", cell_id="seed", repeat=1,
                            workload="throughput", dims={"pool": "solo", "concurrency": 1}, params={}, warmup_s=0)
        con.execute(f"""INSERT INTO sweeps (sweep_id, experiment, workload, started_at, revision, tags, planned)
            SELECT 'n' || lpad(i::VARCHAR, 3, '0'), 'bench', 'throughput',
                   to_timestamp(1700000000 + 86400 * i), 1, json_object('night', i), {cells * repeats}
            FROM range({sweeps}) t(i)""")
        con.execute(f"""INSERT INTO run_starts (experiment, sweep_id, run_id, cell_id, repeat, workload, dims,
                                                params, warmup_s, started_at)
            SELECT 'bench', 'n' || lpad(i::VARCHAR, 3, '0'), format('r{{}}-{{}}-{{}}', i, c, r), 'c' || c, r,
                   'throughput', json_object('pool', 'solo', 'concurrency', c), '{{}}', 0,
                   to_timestamp(1700000000 + 86400 * i + 60 * c + r)
            FROM range({sweeps}) a(i), range({cells}) b(c), range(1, {repeats + 1}) d(r)""")
        con.execute("INSERT INTO run_ends SELECT run_id, 'ok', NULL, started_at, '{}' FROM run_starts "
                    "WHERE experiment = 'bench'")
        con.execute(f"""INSERT INTO metrics
            SELECT s.run_id, m.name, (1000 + (hash(s.run_id || m.name) % 40000) / 1000)
                   * CASE WHEN m.k = 0 AND s.sweep_id >= 'n{sweeps // 2:03d}' THEN 0.8 ELSE 1 END, ''
            FROM run_starts s, (SELECT unnest(?::VARCHAR[]) AS name, generate_subscripts(?::VARCHAR[], 1) - 1 AS k) m
            WHERE s.experiment = 'bench'""", [names, names])


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=365)
    ap.add_argument("--cells", type=int, default=20)
    ap.add_argument("--metrics", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.duckdb"
        fill(path, args.sweeps, args.cells, args.metrics, args.repeats)
        points = args.sweeps * args.cells * args.metrics
        t0, cpu0 = time.monotonic(), _child_cpu()
        proc = subprocess.run([sys.executable, "-m", "cmx.engine.cli.main", "trend", "bench", "--db", str(path),
                               "--format", "json"], capture_output=True, text=True, cwd=REPO)
        wall, cpu = time.monotonic() - t0, _child_cpu() - cpu0
        if proc.returncode:
            print(proc.stderr, file=sys.stderr)
            return 1
        with connect(path, read_only=True) as con:
            t0 = time.monotonic()
            rows = trend_mod._rows(con, "bench", 1, "sweep", (), None)
            read = time.monotonic() - t0
        runs = {}
        for point, cell, name, value, _ in rows:
            runs.setdefault((cell, name), {}).setdefault(point, []).append(value)
        samples = [r for by_point in runs.values() for r in by_point.values()]
        t0 = time.monotonic()
        summaries = stats.summarize_many(samples)
        boot = time.monotonic() - t0
        t0 = time.monotonic()
        found, at = 0, 0
        for by_point in runs.values():
            series = list(by_point.values())
            found += len(trend_mod.change_points(series, [s.median for s in summaries[at:at + len(series)]],
                                                 "higher"))
            at += len(series)
        cps = time.monotonic() - t0
    print(f"cmx trend over {args.sweeps} sweeps × {args.cells} cells × {args.metrics} metrics "
          f"({points:,} points, {len(rows):,} run values): {wall:.2f} s wall, {cpu:.2f} CPU s (target {TARGET_S:g} s, "
          f"wall / target {wall / TARGET_S:.2f})")
    print(f"  in process: read {read:.2f} s, points' bootstrap intervals {boot:.2f} s "
          f"({1000 * boot / points:.2f} ms a point), change points {cps:.2f} s ({found} found)")
    return 0 if wall <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())

"""``cmx trend`` over a year of nightly sweeps: 365 sweeps × 20 cells × 10 metrics (target ≤ 2 s).

    python benchmarks/trend.py [--sweeps 365] [--cells 20] [--metrics 10] [--repeats 3]

A results database is filled with DuckDB SQL (3 ok runs a cell a sweep, values with a few %
noise and a 20 % step in the middle of one metric's history), then ``cmx trend EXPERIMENT
--format json`` is timed as the user runs it (process start included): with nothing computed
before (the old way: every point bootstrapped); again (each finished point's numbers read back
from analysis/statcache.py; the output must be the same); the nightly case, one more night as
``cmx run`` adds it: its sweep's end computes the history (``trend.at_sweep_end``, timed apart, in
a process of its own as in ``cmx run``) and the user's ``cmx trend`` after it; and one more night
that no sweep's end computed (as ``cmx import`` brings one), where ``cmx trend`` bootstraps the
night itself. After each of the two nights the old way runs too (an empty cache): the output must
equal it byte for byte. Printed side by side: wall and CPU seconds, wall / target (≤ 1 is met), the
ratio to the old way on the same data, and the load the machine was under; exit status 1 when the
read-back or the nightly ``cmx trend`` misses the target.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cmx.analysis import trend as trend_mod  # noqa: E402
from cmx.analysis.views import connect  # noqa: E402
from cmx.engine.results import db, metricdefs  # noqa: E402

TARGET_S = 2.0


def fill(path: Path, sweeps: int, cells: int, metrics: int, repeats: int) -> None:
    names = [m for m in metricdefs.METRICS if metricdefs.METRICS[m].better.value != "neither"][:metrics]
    with db.connect(path) as con:
        db.record_run_start(
            con,
            experiment="seed",
            sweep_id="seed",
            run_id="seed",
            cell_id="seed",
            repeat=1,
            workload="throughput",
            dims={"pool": "solo", "concurrency": 1},
            params={},
            warmup_s=0,
        )
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
        con.execute(
            "INSERT INTO run_ends SELECT run_id, 'ok', NULL, started_at, '{}' FROM run_starts "
            "WHERE experiment = 'bench'"
        )
        con.execute(
            f"""INSERT INTO metrics
            SELECT s.run_id, m.name, (1000 + (hash(s.run_id || m.name) % 40000) / 1000)
                   * CASE WHEN m.k = 0 AND s.sweep_id >= 'n{sweeps // 2:03d}' THEN 0.8 ELSE 1 END, ''
            FROM run_starts s, (SELECT unnest(?::VARCHAR[]) AS name, generate_subscripts(?::VARCHAR[], 1) - 1 AS k) m
            WHERE s.experiment = 'bench'""",
            [names, names],
        )


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], env: dict) -> tuple[float, float, str]:
    """(wall s, CPU s, its output) of one process of this Python."""
    t0, cpu0 = time.monotonic(), _child_cpu()
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=REPO, env=env)
    wall, cpu = time.monotonic() - t0, _child_cpu() - cpu0
    if proc.returncode:
        raise SystemExit(proc.stderr)
    return wall, cpu, proc.stdout


def _timed_cli(path: Path, env: dict) -> tuple[float, float, str]:
    """``cmx trend bench --format json`` as the user runs it: (wall s, CPU s, its output)."""
    return _timed(["-m", "cmx.cli.main", "trend", "bench", "--db", str(path), "--format", "json"], env)


#: What ``cmx run``'s end does once the sweep's runs are stored (cli/sweepend.py ``say_history``).
SWEEP_END = """import sys
from pathlib import Path
from cmx.analysis.trend import at_sweep_end
from cmx.analysis.views import connect
with connect(Path(sys.argv[1]), read_only=True) as con:
    assert at_sweep_end(con, "bench", 1) is not None
"""


def _timed_sweep_end(path: Path, env: dict) -> tuple[float, float, str]:
    return _timed(["-c", SWEEP_END, str(path)], env)


def add_night(path: Path, sweeps: int, cells: int, metrics: int, repeats: int) -> None:
    """One more night (sweep ``sweeps``), as a nightly cron line adds it."""
    names = [m for m in metricdefs.METRICS if metricdefs.METRICS[m].better.value != "neither"][:metrics]
    with db.connect(path) as con:
        con.execute(f"""INSERT INTO sweeps (sweep_id, experiment, workload, started_at, revision, tags, planned)
            VALUES ('n{sweeps:03d}', 'bench', 'throughput', to_timestamp(1700000000 + 86400 * {sweeps}), 1,
                    json_object('night', {sweeps}), {cells * repeats})""")
        con.execute(f"""INSERT INTO run_starts (experiment, sweep_id, run_id, cell_id, repeat, workload, dims,
                                                params, warmup_s, started_at)
            SELECT 'bench', 'n{sweeps:03d}', format('r{{}}-{{}}-{{}}', {sweeps}, c, r), 'c' || c, r, 'throughput',
                   json_object('pool', 'solo', 'concurrency', c), '{{}}', 0,
                   to_timestamp(1700000000 + 86400 * {sweeps} + 60 * c + r)
            FROM range({cells}) b(c), range(1, {repeats + 1}) d(r)""")
        con.execute(
            f"INSERT INTO run_ends SELECT run_id, 'ok', NULL, started_at, '{{}}' FROM run_starts "
            f"WHERE sweep_id = 'n{sweeps:03d}'"
        )
        con.execute(
            f"""INSERT INTO metrics
            SELECT s.run_id, m.name, (1000 + (hash(s.run_id || m.name) % 40000) / 1000)
                   * CASE WHEN m.k = 0 THEN 0.8 ELSE 1 END, ''
            FROM run_starts s, (SELECT unnest(?::VARCHAR[]) AS name, generate_subscripts(?::VARCHAR[], 1) - 1 AS k) m
            WHERE s.sweep_id = 'n{sweeps:03d}'""",
            [names, names],
        )


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
        # The old way: nothing computed before (an empty statistics cache, analysis/statcache.py).
        env = {**os.environ, "CMX_STATS_CACHE": str(Path(tmp) / "stats.duckdb")}
        cold, cold_cpu, cold_out = _timed_cli(path, env)
        # The same again: every finished point's summary is read back.
        warm, warm_cpu, warm_out = _timed_cli(path, env)
        assert warm_out == cold_out, "read-back numbers differ from computed ones"
        # The nightly case: one more night as `cmx run` adds it, whose end computes the history.
        add_night(path, args.sweeps, args.cells, args.metrics, args.repeats)
        end, end_cpu, _ = _timed_sweep_end(path, env)
        nightly, nightly_cpu, nightly_out = _timed_cli(path, env)
        # The old way on the nightly database (an empty cache again): the nightly run's output must be it.
        cold2, cold2_cpu, cold2_out = _timed_cli(path, {**env, "CMX_STATS_CACHE": str(Path(tmp) / "fresh2.duckdb")})
        assert nightly_out == cold2_out, "the nightly run's numbers differ from computed ones"
        # One more night that no sweep's end computed (imported): `cmx trend` bootstraps it itself.
        add_night(path, args.sweeps + 1, args.cells, args.metrics, args.repeats)
        imported, imported_cpu, imported_out = _timed_cli(path, env)
        cold3, cold3_cpu, cold3_out = _timed_cli(path, {**env, "CMX_STATS_CACHE": str(Path(tmp) / "fresh3.duckdb")})
        assert imported_out == cold3_out, "the imported night's numbers differ from computed ones"
        with connect(path, read_only=True) as con:
            t0 = time.monotonic()
            rows, _ = trend_mod._rows(con, "bench", 1, "sweep", (), None)
            read = time.monotonic() - t0
    values = sum(len(r[-1]) for r in rows)
    print(
        f"cmx trend over {args.sweeps} sweeps × {args.cells} cells × {args.metrics} metrics "
        f"({points:,} points, {values:,} run values), target {TARGET_S:g} s, `cmx trend bench --format json`:"
    )
    print(f"  {'':40} {'wall s':>8} {'CPU s':>8} {'wall / target':>14} {'vs old way':>11}")
    for what, wall, cpu, base in (
        ("old way: computed (empty cache)", cold, cold_cpu, cold),
        ("read back (the same sweeps again)", warm, warm_cpu, cold),
        ("old way, one night more (empty cache)", cold2, cold2_cpu, cold2),
        ("  that night's sweep end (in cmx run)", end, end_cpu, cold2),
        ("nightly: cmx trend after that sweep", nightly, nightly_cpu, cold2),
        ("old way, a night imported (empty cache)", cold3, cold3_cpu, cold3),
        ("a night imported: cmx trend computes it", imported, imported_cpu, cold3),
    ):
        print(f"  {what:40} {wall:8.2f} {cpu:8.2f} {wall / TARGET_S:14.2f} {wall / base:10.2f}x")
    print(
        f"  in process: reading the runs grouped per point {read:.2f} s; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    return 0 if max(warm, nightly) <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())

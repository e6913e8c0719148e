"""100 cells × 3 repeats, 1M task rows (issue 28): ``cmx report`` (≤ 5 s), ``cmx recommend``
(≤ 1 s), and the report's page in headless Chromium (every chart drawn ≤ 2 s), in one run.

    python benchmarks/cells100.py [--tasks 1000000] [--repeats 3]

The database is tests/results_fixture.py's ``build_grid`` (broker 2 × pool 5 × concurrency 10,
every chart's data, tasks filled in SQL). ``cmx report`` and ``cmx recommend`` are timed as the
CLI runs (process start included); the page's figure is what it writes into its body when the
last chart is drawn (milliseconds since it was requested). Printed like benchmarks/scale.py:
wall time, CPU seconds, target and wall / target; exit status 1 when a target is missed.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.scale import children_cpu, line  # noqa: E402
from tests.results_fixture import GRID_BROKERS, GRID_CONCURRENCY, GRID_POOLS, build_grid  # noqa: E402

REPORT_TARGET_S, RECOMMEND_TARGET_S, PAGE_TARGET_S = 5.0, 1.0, 2.0


def timed_cli(*args: str) -> tuple[float, float, str]:
    t, cpu = time.perf_counter(), children_cpu()
    p = subprocess.run([sys.executable, "-m", "cmx.engine.cli.main", *args], cwd=REPO, capture_output=True,
                       text=True, timeout=600)
    took, cpu = time.perf_counter() - t, children_cpu() - cpu
    if p.returncode != 0:
        sys.exit(f"cmx {args[0]} failed ({p.returncode}): {p.stderr[-2000:]}")
    return took, cpu, p.stdout


def page_drawn_s(page: Path, profile: Path) -> float | None:
    """Seconds from request to every chart drawn, as the page records it; None without Chromium."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        return None
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        f"--user-data-dir={profile}", "--virtual-time-budget=30000", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=180)
    found = re.search(r'data-charts-drawn-ms="(\d+)"', p.stdout)
    if not found or "chart failed:" in p.stdout.replace('"chart failed: " + err', ""):
        sys.exit("the page did not draw every chart")
    return int(found.group(1)) / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=1_000_000, help="task rows in all")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    runs = len(GRID_BROKERS) * len(GRID_POOLS) * len(GRID_CONCURRENCY) * args.repeats
    ok = True
    with tempfile.TemporaryDirectory(prefix="cmx-cells100-") as tmp:
        tmp = Path(tmp)
        db = tmp / "grid.duckdb"
        t = time.perf_counter()
        build_grid(db, repeats=args.repeats, tasks_per_run=-(-args.tasks // runs))
        print(f"filled a database of {runs // args.repeats} cells × {args.repeats} repeats, "
              f"{-(-args.tasks // runs) * runs:,} task rows in {time.perf_counter() - t:.1f} s")
        took, cpu, out = timed_cli("report", "grid", "--db", str(db), "--out", str(tmp / "out"))
        print(f"  ({out.strip().split(': ', 1)[-1]})")
        ok &= line("cmx report (process start incl.)", took, cpu, REPORT_TARGET_S)
        took, cpu, _ = timed_cli("recommend", "grid", "--maximize", "consume_rate", "--db", str(db),
                                 "--format", "json")
        ok &= line("cmx recommend --maximize consume_rate (process start incl.)", took, cpu, RECOMMEND_TARGET_S)
        drawn = page_drawn_s(tmp / "out" / "index.html", tmp / "profile")
        if drawn is None:
            print("  the page in Chromium: chromium is not installed, not measured")
        else:
            ok &= line("the page in headless Chromium: request to every chart drawn", drawn, float("nan"),
                       PAGE_TARGET_S)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

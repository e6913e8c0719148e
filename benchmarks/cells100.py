"""100 cells × 3 repeats, 1M task rows (issue 28): ``cmx report`` (≤ 5 s), ``cmx recommend``
(≤ 1 s), and the report's page in headless Chromium (every chart drawn ≤ 2 s), in one run.

    python benchmarks/cells100.py [--tasks 1000000] [--repeats 3] [--before REF] [--rounds N]

The database is tests/results_fixture.py's ``build_grid`` (broker 2 × pool 5 × concurrency 10,
every chart's data, tasks filled in SQL). ``cmx report`` and ``cmx recommend`` are timed as the
CLI runs (process start included); the page's figure is what it writes into its body when the
last chart is drawn (milliseconds since it was requested). Printed like benchmarks/scale.py:
wall time, CPU seconds, target and wall / target; exit status 1 when a target is missed.

``--before REF`` (a git commit, e.g. the one before a speed change) also times that commit's cmx
(its tree from ``git archive``, put first on PYTHONPATH) on the same database, alternating with
this checkout's so both see the same load, and prints them side by side with after / before.
``--rounds N`` times each N times and keeps the fastest (on a shared machine the others mostly
measure the neighbours); with ``--before`` it also prints each side's median CPU seconds over the
rounds and the after / before ratio of each round's. The CPU column counts every process of the
command (PNG workers too).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
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


def timed_cli(*args: str, pythonpath: Path | None = None) -> tuple[float, float, str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)} if pythonpath else None
    t, cpu = time.perf_counter(), children_cpu()
    p = subprocess.run(
        [sys.executable, "-m", "cmx.cli.main", *args], cwd=REPO, capture_output=True, text=True, timeout=600, env=env
    )
    took, cpu = time.perf_counter() - t, children_cpu() - cpu
    if p.returncode != 0:
        sys.exit(f"cmx {args[0]} failed ({p.returncode}): {p.stderr[-2000:]}")
    return took, cpu, p.stdout


def checkout(ref: str, into: Path) -> Path:
    """``ref``'s tree, importable as ``cmx`` ahead of this checkout's (an editable install's
    finder comes after PYTHONPATH): the folder to put on PYTHONPATH."""
    src, path = into / "src", into / "path" / "cmx"
    src.mkdir(parents=True)
    path.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, capture_output=True, timeout=120)
    if archive.returncode != 0:
        sys.exit(f"--before {ref}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True, timeout=120)
    for room in ("engine", "analysis", "workloads", "cli", "roles", "inventory", "experiments", "docs"):
        if (src / room).exists():  # cli/ without it: `-m cmx.cli.main` ran this checkout's CLI on REF's rooms
            (path / room).symlink_to(src / room)
    return path.parent


def fastest(rounds: int, after: tuple[str, ...], before: tuple[str, ...] | None, old: Path | None):
    """(before, after) runs of the command, each the fastest of ``rounds``, taken in turn."""
    was, now = [], []
    for _ in range(rounds):
        if old is not None:
            was.append(timed_cli(*before, pythonpath=old))
        now.append(timed_cli(*after))
    pick = lambda runs: min(runs, key=lambda r: r[0]) if runs else None  # noqa: E731
    if was and rounds > 1:  # CPU seconds move much less with the neighbours than wall time: every round's
        ratios = sorted(n[1] / w[1] for w, n in zip(was, now))
        cpu = {side: statistics.median(r[1] for r in runs) for side, runs in (("before", was), ("after", now))}
        print(
            f"  cmx {after[0]}, {rounds} rounds in turn: cpu s median before {cpu['before']:.2f}, "
            f"after {cpu['after']:.2f}; after/before per round: median "
            f"{statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})"
        )
    return pick(was), pick(now)


def differing_files(a: Path, b: Path) -> list[str]:
    """The files of two report folders that differ (or are in one only)."""
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    return [
        n
        for n in names
        if not ((a / n).is_file() and (b / n).is_file() and (a / n).read_bytes() == (b / n).read_bytes())
    ]


def side_by_side(what: str, before: tuple[float, float] | None, after: tuple[float, float], target: float) -> bool:
    if before is None:
        return line(what, after[0], after[1], target)
    print(
        f"  {what:<44} before {before[0]:6.2f} s (cpu {before[1]:5.2f})  after {after[0]:6.2f} s "
        f"(cpu {after[1]:5.2f})  after/before {after[0] / before[0]:4.2f}  target {target:.0f} s  "
        f"ratio {after[0] / target:4.2f}  {'met' if after[0] <= target else 'MISSED'}"
    )
    return after[0] <= target


def page_drawn_s(page: Path, profile: Path) -> float | None:
    """Seconds from request to every chart drawn, as the page records it; None without Chromium."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        return None
    p = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=30000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    found = re.search(r'data-charts-drawn-ms="(\d+)"', p.stdout)
    if not found or "chart failed:" in p.stdout.replace('"chart failed: " + err', ""):
        sys.exit("the page did not draw every chart")
    return int(found.group(1)) / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=1_000_000, help="task rows in all")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before", metavar="REF", help="also time this git commit's cmx, side by side")
    ap.add_argument("--rounds", type=int, default=1, help="time each command this many times, keep the fastest")
    args = ap.parse_args()
    runs = len(GRID_BROKERS) * len(GRID_POOLS) * len(GRID_CONCURRENCY) * args.repeats
    ok = True
    with tempfile.TemporaryDirectory(prefix="cmx-cells100-") as tmp:
        tmp = Path(tmp)
        db = tmp / "grid.duckdb"
        t = time.perf_counter()
        build_grid(db, repeats=args.repeats, tasks_per_run=-(-args.tasks // runs))
        print(
            f"filled a database of {runs // args.repeats} cells × {args.repeats} repeats, "
            f"{-(-args.tasks // runs) * runs:,} task rows in {time.perf_counter() - t:.1f} s"
        )
        old = checkout(args.before, tmp / "before") if args.before else None
        if old:
            print(f"before: {args.before} (git archive, on PYTHONPATH); after: this checkout")
        report = ("report", "grid", "--db", str(db), "--out", str(tmp / "out"))
        recommend = ("recommend", "grid", "--maximize", "consume_rate", "--db", str(db), "--format", "json")
        was, (took, cpu, out) = fastest(args.rounds, report, (*report[:-1], str(tmp / "out-before")), old)
        print(f"  ({out.strip().split(': ', 1)[-1]})")
        ok &= side_by_side("cmx report (process start incl.)", was and was[:2], (took, cpu), REPORT_TARGET_S)
        if was is not None and differing_files(tmp / "out-before", tmp / "out"):
            print(
                "  cmx report: before and after wrote different files: "
                f"{', '.join(differing_files(tmp / 'out-before', tmp / 'out'))}"
            )
            ok = False
        was, (took, cpu, said) = fastest(args.rounds, recommend, recommend, old)
        ok &= side_by_side("cmx recommend --maximize consume_rate", was and was[:2], (took, cpu), RECOMMEND_TARGET_S)
        if was is not None and was[2] != said:
            print("  cmx recommend: before and after printed different answers")
            ok = False
        drawn = page_drawn_s(tmp / "out" / "index.html", tmp / "profile")
        if drawn is None:
            print("  the page in Chromium: chromium is not installed, not measured")
        else:
            ok &= line(
                "the page in headless Chromium: request to every chart drawn", drawn, float("nan"), PAGE_TARGET_S
            )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

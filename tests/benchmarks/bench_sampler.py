"""What the sampler costs: per-call reads, and its own CPU while watching 1 and 20 processes.

    .venv/bin/python tests/benchmarks/bench_sampler.py [--duration 20] [--counts 1,20]

Not collected by pytest (no test_ prefix). Figures are printed beside the ones DESIGN.md
assumes (RSS ≈ 15 µs, PSS ≈ 4 ms for 200 MB, sampler within ~1 % of a core).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cmx.workloads.host.procfs import WatchedProcess, read_stat  # noqa: E402
from cmx.workloads.host.pss import read_pss  # noqa: E402

CPU_BUDGET_PERCENT = 1.0

# A parent holding PARENT_MB that forks N-1 children each adding CHILD_MB of their own, then
# writes its pid to the pidfile: a small prefork worker.
FLEET = textwrap.dedent("""
    import os, sys, time
    pidfile, n, parent_mb, child_mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    block = bytearray(b"\\x01") * (parent_mb << 20)
    me = os.getpid()
    for _ in range(n - 1):
        if os.fork() == 0:
            own = bytearray(b"\\x02") * (child_mb << 20)
            while os.getppid() == me:
                time.sleep(0.2)
            os._exit(0)
    with open(pidfile + ".tmp", "w") as f:
        f.write(f"{me}\\n")
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(3600)
""")


def per_call(fn, seconds: float = 1.0) -> float:
    """Mean seconds per call of ``fn``, over about ``seconds``."""
    fn()
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()
        calls += 1
    return elapsed / calls


def start_fleet(tmp: Path, n: int, parent_mb: int, child_mb: int) -> tuple[subprocess.Popen, Path]:
    pidfile = tmp / f"fleet-{n}-{parent_mb}.pid"
    proc = subprocess.Popen([sys.executable, "-c", FLEET, str(pidfile), str(n), str(parent_mb), str(child_mb)])
    deadline = time.monotonic() + 30
    while not pidfile.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("fleet did not start")
        time.sleep(0.05)
    return proc, pidfile


def stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


def bench_calls(tmp: Path) -> None:
    proc, _ = start_fleet(tmp, 1, 200, 0)
    try:
        target = psutil.Process(proc.pid)
        rss_mb = target.memory_info().rss / 2**20
        pid = proc.pid
        tracked = WatchedProcess(pid)
        rows = [
            ("psutil memory_info() (RSS)", per_call(target.memory_info), "≈ 15 µs"),
            ("psutil cpu_percent(None)", per_call(lambda: target.cpu_percent(None)), ""),
            ("open+read+close /proc/PID/stat", per_call(lambda: read_stat(pid)), ""),
            ("sampler tick: pread stat+status", per_call(tracked.read), ""),
            ("sampler: smaps_rollup (PSS)", per_call(lambda: read_pss(pid)), "≈ 4 ms"),
            ("psutil memory_full_info() (PSS)", per_call(target.memory_full_info), "≈ 4 ms"),
        ]
    finally:
        tracked.close()
        stop(proc)
    print(f"Per call, on one process of {rss_mb:.0f} MB RSS")
    print(f"  {'call':34} {'measured':>12}  DESIGN.md")
    for name, seconds, design in rows:
        print(f"  {name:34} {seconds * 1e6:>9.1f} µs  {design}")
    ratio = rows[4][1] / rows[0][1]
    print(f"  PSS/RSS cost ratio: {ratio:.0f}x (why PSS is read every --pss-every ticks only)")
    print("  (the sampler's tick reads RSS, CPU and VmHWM with two preads of kept-open files)")


def bench_sampler(tmp: Path, n: int, duration: float) -> dict:
    proc, pidfile = start_fleet(tmp, n, 50, 10)
    run_dir = tmp / f"run-{n}"
    try:
        sampler = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cmx.workloads.host.sampler",
                "--run-dir",
                str(run_dir),
                "--host",
                "bench",
                "--watch",
                f"worker={pidfile}",
            ],
            cwd=ROOT,
        )
        time.sleep(duration)
        sampler.send_signal(signal.SIGTERM)
        if sampler.wait(timeout=30) != 0:
            raise RuntimeError(f"sampler exited {sampler.returncode}")
    finally:
        stop(proc)
    summary = json.loads((run_dir / "sampler.json").read_text())
    pids = {line.split(",")[1] for line in (run_dir / "samples.csv").read_text().splitlines()[1:]}
    summary["processes"] = len(pids) - 1  # minus the sampler itself
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per sampler run")
    parser.add_argument("--counts", default="1,20", help="watched process counts")
    args = parser.parse_args()
    print(f"host: {os.cpu_count()} cores, Python {sys.version.split()[0]}, psutil {psutil.__version__}\n")
    with tempfile.TemporaryDirectory(prefix="cmx-bench-") as tmp:
        bench_calls(Path(tmp))
        print(f"\nSampler's own CPU at default settings (interval 0.2 s, PSS every 5th tick), {args.duration:g} s each")
        print(
            f"  {'watched':>7} {'ticks':>6} {'late':>5} {'PSS rounds':>10} {'of it PSS %':>11} "
            f"{'steady CPU %':>12} {'incl. startup %':>15}  within {CPU_BUDGET_PERCENT:g} %?"
        )
        for n in (int(c) for c in args.counts.split(",")):
            s = bench_sampler(Path(tmp), n, args.duration)
            steady = 100 * (s["cpu_seconds"] - s["startup_cpu_seconds"]) / s["wall_seconds"]
            total = 100 * s["cpu_seconds"] / s["wall_seconds"]
            pss = 100 * s["pss_cpu_seconds"] / s["wall_seconds"]
            verdict = "yes" if steady <= CPU_BUDGET_PERCENT else "NO"
            print(
                f"  {s['processes']:>7} {s['ticks']:>6} {s['late_ticks']:>5} {s['pss_rounds']:>10} {pss:>11.2f} "
                f"{steady:>12.2f} {total:>15.2f}  {verdict}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

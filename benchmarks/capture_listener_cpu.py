"""CPU that ``cmx capture`` spends per event, for two installs of cmx side by side (issue 40 point 5).

    python benchmarks/capture_listener_cpu.py --a PYTHON_A --b PYTHON_B --url URL [--tasks 5000] [--repeats 4]
        [--pin 0,1]

Each install's Python runs ``python -m cmx.cli.main capture`` (pinned to CPU L with ``--pin P,L``); once it
prints its first progress line, this process (pinned to CPU P) publishes ``--tasks`` tasks with
``task_send_sent_event = True`` (benchmarks/capture_overhead.py's loop), waits 0.5 s, reads the capture's
user + system CPU since its first line, and stops it with Ctrl-C. A and B alternate (A B, B A, ...).
Printed: per run and as medians, the capture's CPU microseconds per event, the producer's rate and the
tasks captured. CPU time, unlike a rate, does not depend much on what else the machine runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.capture_overhead import READY_S, publish_rate  # noqa: E402


def one(python: str, url: str, tasks: int, cpu: int | None, out: Path) -> tuple[float, float, str]:
    import psutil

    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    proc = subprocess.Popen(
        [python, "-m", "cmx.cli.main", "capture", "--out", str(out), "--duration", "600"],
        env={**os.environ, "CMX_CAPTURE_BROKER_URL": url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=pin,
    )
    seen, deadline = "", time.monotonic() + READY_S
    while "capturing" not in seen and time.monotonic() < deadline and proc.poll() is None:
        seen += proc.stderr.read(1)
    if "capturing" not in seen:
        proc.kill()
        raise RuntimeError(f"{python}: cmx capture not listening within {READY_S:g} s")
    before = psutil.Process(proc.pid).cpu_times()
    rate, _ = publish_rate(url, f"capcpu-{os.getpid()}", tasks, True)
    time.sleep(0.5)
    after = psutil.Process(proc.pid).cpu_times()
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=120)
    used = after.user + after.system - before.user - before.system
    return used / tasks * 1e6, rate, (stdout.strip().splitlines() or [""])[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, metavar="PYTHON", help="a Python with one install of cmx")
    ap.add_argument("--b", required=True, metavar="PYTHON", help="a Python with the other")
    ap.add_argument("--url", required=True)
    ap.add_argument("--tasks", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--pin", default=None, metavar="P,L")
    args = ap.parse_args()
    producer, listener = (int(c) for c in args.pin.split(",")) if args.pin else (None, None)
    if producer is not None:
        os.sched_setaffinity(0, {producer})
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    runs: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
    for r in range(args.repeats):
        for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
            us, rate, last = one(
                getattr(args, side), args.url, args.tasks, listener, scratch / f"capcpu-{os.getpid()}-{side}.parquet"
            )
            runs[side].append((us, rate))
            print(f"{side} {us:6.0f} us an event, producer {rate:,.0f}/s; {last}", flush=True)
    for side, values in runs.items():
        cpu = [v[0] for v in values]
        print(
            f"{side}: capture CPU {statistics.median(cpu):.0f} us an event (min {min(cpu):.0f}, max {max(cpu):.0f}), "
            f"producer median {statistics.median(v[1] for v in values):,.0f}/s ({getattr(args, side)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How many increments Celery's count of accepted tasks loses under the threads pool, without
cmx's lock (workloads/runtime/acceptcount.py) and with it: N tasks accepted and finished from T
threads through Celery's own ``task_accepted``, as tests/unit/test_accept_count.py does, several
rounds each. Prints one line per (threads, N) with the lost share of each round.

    python benchmarks/accept_count.py [--rounds 5] [--n 40000 200000] [--threads 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from celery.worker import request, state


class Req:
    __slots__ = ("id", "name", "__weakref__")

    def __init__(self, i: int):
        self.id, self.name = f"t{i}", "cmx.bench.counted"


def accept_all(n: int, threads: int, switch: float) -> int:
    state.total_count.pop("cmx.bench.counted", None)

    def one(r):
        request.task_accepted(r)
        state.task_ready(r)

    saved = sys.getswitchinterval()
    sys.setswitchinterval(switch)
    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, (Req(i) for i in range(n)), chunksize=1))
    finally:
        sys.setswitchinterval(saved)
    return state.total_count.pop("cmx.bench.counted", 0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, nargs="+", default=[40_000, 200_000])
    ap.add_argument("--threads", type=int, nargs="+", default=[4])
    ap.add_argument("--switch", type=float, default=1e-5, help="sys.setswitchinterval during a round")
    args = ap.parse_args()
    import celery

    print(
        f"celery {celery.__version__}, python {sys.version.split()[0]}, switch interval {args.switch:g} s, "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    request.task_accepted = state.task_accepted  # Celery's own, unguarded
    for threads in args.threads:
        for n in args.n:
            lost = [(n - accept_all(n, threads, args.switch)) / n for _ in range(args.rounds)]
            shown = ", ".join(f"{x:.2%}" for x in lost)
            print(
                f"unguarded, {threads} threads, {n:,} tasks: lost {shown} (median {sorted(lost)[len(lost) // 2]:.2%})"
            )
    from cmx.workloads.runtime import acceptcount

    acceptcount.guard()
    for threads in args.threads:
        for n in args.n:
            lost = [(n - accept_all(n, threads, args.switch)) / n for _ in range(args.rounds)]
            print(f"guarded (cmx's lock), {threads} threads, {n:,} tasks: lost {', '.join(f'{x:.2%}' for x in lost)}")


if __name__ == "__main__":
    main()

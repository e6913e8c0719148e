"""Where per-task stamping's cost goes: one Celery worker, no harness around it, parts side by side.

    python benchmarks/stamping_parts.py                       # solo, 16 rounds of 4,000 tasks
    python benchmarks/stamping_parts.py --pool threads --rounds 8 --variants off,receivers,full

benchmarks/stamping.py measures stamping on and off through ``cmx run``, where the harness, the
sampler and the broker's other clients add noise of a few % per run. This one takes them away to
say *which part* costs what. Each trial publishes ``--tasks`` no-op tasks from a process of its
own (as a run's driver does: stamping its publishes when the variant stamps) to a queue of its own
on the loopback Redis (db 14), then one fresh worker process (``app.Worker``: ``--pool``,
concurrency 4, solo 1, prefetch 4, no gossip/mingle/heartbeat) consumes them and times tasks 500
to N from inside the task: wall time (the consume rate) and the process's CPU time (every thread:
the recorder's flusher too). Variants, in a shuffled order each round:

- ``off``: no per-task handler (what ``params.stamping: false`` runs);
- ``receivers``: a no-op receiver on ``task_received``, ``task_prerun`` and ``task_postrun``:
  the cost of Celery dispatching those signals at all;
- ``full``: cmx's stamps and Recorder (``instrument.install``) as every run of a cmx app has them:
  through its task class (workloads/runtime/instrument.py ``StampedTask``), no per-task signal;
- ``signals``: the same stamps through Celery's signals, as a user's own app has them.

Every variant but ``signals`` runs its task on cmx's task class, as a run does.

Printed: per variant the median CPU µs per task and consume rate over the rounds, and the cost of
each against ``off`` (target of issue #11: stamping ≤ 2 % of the consume rate). Batches differ from
each other by up to ~20 µs/task on a 2-core VM even when idle: compare variants within one run only.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BROKER = "redis://127.0.0.1:6379/14"
WARM = 500  # tasks before the clock starts (worker start-up, first connections)
VARIANTS = ("off", "receivers", "full", "signals")
TARGET_PCT = 2.0


def trial(pool: str, variant: str, n: int, rows_dir: str, queue: str, role: str) -> None:
    """``publish``: one process sends n tasks to ``queue``, as a run's driver does (its own
    process, stamping its publishes when the variant stamps). ``consume``: one worker process
    consumes them, prints `rate R cpu C` and exits. The task counts itself in this process, so
    the pool must run tasks here (not prefork's children)."""
    if role == "consume" and pool == "gevent":  # as `celery worker -P gevent` patches first
        from gevent import monkey

        monkey.patch_all()
    elif role == "consume" and pool == "eventlet":
        import eventlet

        eventlet.monkey_patch()
    sys.path.insert(0, str(REPO))
    from celery import Celery, signals
    from kombu import Queue

    from cmx.workloads.runtime import instrument
    from cmx.workloads.runtime.recorder import Recorder

    task_cls = "celery.app.task:Task" if variant == "signals" else instrument.StampedTask
    app = Celery("parts", broker=BROKER, set_as_current=True, task_cls=task_cls)
    app.conf.update(
        task_default_queue=queue,
        task_queues=(Queue(queue),),
        task_ignore_result=True,
        worker_prefetch_multiplier=4,
        worker_enable_remote_control=False,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )
    done = {"k": 0}

    @app.task(name="parts.noop", shared=False)
    def noop(payload):
        k = done["k"] = done["k"] + 1
        if k == WARM:
            done["t0"] = (time.perf_counter(), time.process_time())
        elif k == n:
            wall, cpu = time.perf_counter() - done["t0"][0], time.process_time() - done["t0"][1]
            print(f"rate {(n - WARM) / wall:.1f} cpu {1e6 * cpu / (n - WARM):.2f}", flush=True)
            os._exit(0)

    # As in a run, stamping on or off is decided in each process (workloads/app/factory.py create_app).
    instrument.install(app, Recorder(Path(rows_dir), "bench"), stamping=variant in ("full", "signals"))
    if variant == "receivers":
        for sig in (signals.task_received, signals.task_prerun, signals.task_postrun):
            sig.connect(lambda **_: None, weak=False)
    if role == "publish":
        with app.producer_or_acquire() as producer:
            for _ in range(n):
                noop.apply_async(("x" * 64,), producer=producer)
        return
    app.Worker(
        pool=pool,
        concurrency=1 if pool == "solo" else 4,
        without_gossip=True,
        without_mingle=True,
        without_heartbeat=True,
        loglevel="WARNING",
        queues=[queue],
    ).start()


def run_trial(pool: str, variant: str, n: int) -> tuple[float, float] | None:
    queue = f"cmx-stamping-parts.{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="cmx-stamping-parts-") as rows_dir:  # the recorder's files
        for role in ("publish", "consume"):
            proc = subprocess.run(
                [sys.executable, __file__, "--trial", pool, variant, str(n), rows_dir, queue, role],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=600,
            )
            if proc.returncode != 0:
                break
    m = re.search(r"rate ([\d.]+) cpu ([\d.]+)", proc.stdout)
    if not m:
        print(f"  ! {pool} {variant}: no result ({proc.stderr.strip()[-300:]})")
        return None
    return float(m[1]), float(m[2])


def _clean() -> None:
    """Remove what the trials left in Redis db 14: their queues (a failed trial's still holds
    messages), their bindings and the unacked index the database's consumers share; nothing else
    uses db 14."""
    import redis

    r = redis.Redis.from_url(BROKER)
    for key in [*r.scan_iter("*cmx-stamping-parts.*"), "unacked", "unacked_index", "_kombu.binding_deadlines"]:
        r.delete(key)


def main() -> None:
    if len(sys.argv) == 8 and sys.argv[1] == "--trial":
        trial(sys.argv[2], sys.argv[3], int(sys.argv[4]), *sys.argv[5:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--pool",
        default="solo",
        choices=("solo", "threads", "gevent", "eventlet"),
        help="prefork runs tasks in child processes: benchmarks/stamping.py measures it",
    )
    # Many short trials beat few long ones: each process's hash seed and memory layout move its
    # rate by a few %, and only more processes average that out.
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--tasks", type=int, default=4_000)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    variants = args.variants.split(",")
    if "off" not in variants or not set(variants) <= set(VARIANTS):
        sys.exit(f"--variants: some of {', '.join(VARIANTS)}, off among them")
    if args.tasks <= WARM:
        sys.exit(f"--tasks: more than {WARM}")
    rng = random.Random(args.seed)
    got: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    t0 = time.monotonic()
    try:
        for _ in range(args.rounds):
            order = variants[:]
            rng.shuffle(order)
            for v in order:
                if (r := run_trial(args.pool, v, args.tasks)) is not None:
                    got[v].append(r)
    finally:
        _clean()
    print(
        f"{args.pool}: {args.rounds} rounds x {len(variants)} variants of {args.tasks} no-op tasks "
        f"(redis, shuffled, seed {args.seed}) in {time.monotonic() - t0:.0f} s; medians:"
    )
    base_rate = statistics.median(r for r, _ in got["off"]) if got["off"] else float("nan")
    base_cpu = statistics.median(c for _, c in got["off"]) if got["off"] else float("nan")
    print(f"  {'variant':<10}{'n':>3}{'rate/s':>9}{'cpu µs/task':>13}{'+cpu µs':>9}{'rate cost':>11}")
    for v in variants:
        if not got[v]:
            continue
        rate, cpu = statistics.median(r for r, _ in got[v]), statistics.median(c for _, c in got[v])
        cost = 100 * (1 - rate / base_rate)
        print(
            f"  {v:<10}{len(got[v]):>3}{rate:9.0f}{cpu:13.1f}{cpu - base_cpu:9.1f}{cost:10.1f} %"
            + (f"  (target ≤ {TARGET_PCT:g} %: {'met' if cost <= TARGET_PCT else 'not met'})" if v == "full" else "")
        )


if __name__ == "__main__":
    main()

"""What capturing costs a producer (issue 40 point 5: at most 2 % of its throughput).

    python benchmarks/capture_overhead.py [--tasks 3000] [--repeats 5] [--brokers redis,rabbitmq]

Per broker, each round publishes ``--tasks`` tasks with a plain ``apply_async`` loop (Celery's
client, as a producer of the fleet would) once in each mode, in a shuffled order, into an emptied
queue that nothing consumes:

- ``off``: ``task_send_sent_event = False`` (the producer as it was);
- ``sent_event``: ``task_send_sent_event = True``, nobody listening (each send also publishes a
  task-sent event);
- ``captured``: the same with ``cmx capture`` listening on the broker (a separate process, started
  before the round and stopped with Ctrl-C after it).

Printed: median rate of each mode over the rounds (min-max) and each mode's change against
``off``. The capture process runs on this machine too: on a shared 2-core host its CPU competes with
the producer's, which a fleet's separate capture host would not.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

URLS = {"redis": "redis://127.0.0.1:6379/13", "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//"}
MODES = ("off", "sent_event", "captured")
TARGET = 0.02


def make_app(broker: str, queue: str, sent_event: bool):
    from celery import Celery

    app = Celery(f"capbench-{uuid.uuid4().hex[:6]}", broker=URLS[broker], set_as_current=False)
    app.conf.update(task_default_queue=queue, task_send_sent_event=sent_event,
                    broker_connection_retry_on_startup=True)
    @app.task(name="capbench.noop", shared=False)
    def noop(payload):
        return None

    return app


def publish_rate(broker: str, queue: str, tasks: int, sent_event: bool) -> float:
    app = make_app(broker, queue, sent_event)
    task = app.tasks["capbench.noop"]
    with app.producer_or_acquire() as producer:
        task.apply_async(("warm",), producer=producer)  # connection and declarations out of the timing
        began = time.perf_counter()
        for _ in range(tasks):
            task.apply_async(("x" * 64,), producer=producer)
        rate = tasks / (time.perf_counter() - began)
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)
    return rate


def start_capture(broker: str, out: Path) -> subprocess.Popen:
    env = {**os.environ, "CMX_CAPTURE_BROKER_URL": URLS[broker], "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "cmx.cli.main", "capture", "--out", str(out),
                             "--duration", "600"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    time.sleep(3.0)  # its event queue is bound before the round starts
    return proc


def stop_capture(proc: subprocess.Popen) -> tuple[str, float]:
    """Ctrl-C, as a user ends a capture; its last line ("captured N tasks to FILE") and the CPU
    seconds it used (it competes with the producer for this machine's cores)."""
    import psutil

    times = psutil.Process(proc.pid).cpu_times()
    cpu = times.user + times.system
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return (out.strip().splitlines()[-1] if out.strip() else ""), cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--brokers", default="redis,rabbitmq")
    args = ap.parse_args()
    rng = random.Random(1)
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"capbench-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    for broker in args.brokers.split(","):
        queue = f"capbench-{uuid.uuid4().hex[:8]}"
        rates: dict[str, list[float]] = {m: [] for m in MODES}
        captured, cpu, captured_s = 0, 0.0, 0.0
        for _ in range(args.repeats):
            for mode in rng.sample(MODES, len(MODES)):
                proc = start_capture(broker, scratch / f"{broker}.parquet") if mode == "captured" else None
                try:
                    rates[mode].append(publish_rate(broker, queue, args.tasks, mode != "off"))
                finally:
                    if proc is not None:
                        last, used = stop_capture(proc)
                        captured += int(last.split()[1].replace(",", "")) if last.startswith("captured") else 0
                        cpu += used
                if mode == "captured":
                    captured_s += args.tasks / rates[mode][-1]
        base = statistics.median(rates["off"])
        print(f"-- {broker}: {args.tasks} tasks a round, {args.repeats} rounds, apply_async loop, 64-byte payload")
        print(f"   {'mode':<11} {'median/s':>9} {'min-max/s':>17} {'vs off':>8}")
        for mode in MODES:
            med = statistics.median(rates[mode])
            print(f"   {mode:<11} {med:>9,.0f} {min(rates[mode]):>8,.0f}-{max(rates[mode]):<8,.0f} "
                  f"{(med / base - 1) * 100:>+7.1f}%")
        cost = 1 - statistics.median(rates["captured"]) / statistics.median(rates["sent_event"])
        print(f"   the capture listening costs {cost * 100:+.1f} % against sent events alone; sent events plus "
              f"capture {(1 - statistics.median(rates['captured']) / base) * 100:+.1f} % against off "
              f"(target at most {TARGET * 100:g} %); tasks captured over the rounds: {captured:,} of "
              f"{(args.tasks + 1) * args.repeats:,} sent (a warm-up task a round)")
        print(f"   cmx capture used {cpu:.1f} CPU s over {captured_s:.1f} s of captured publishing (and its 3 s "
              f"start a round): {cpu / (captured_s + 3 * args.repeats) * 100:.0f} % of a core on this machine")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What capturing costs a producer (issue 40 point 5: at most 2 % of its throughput).

    python benchmarks/capture_overhead.py [--tasks 3000] [--repeats 16] [--brokers redis,rabbitmq]
        [--pin 0,1] [--pin-rabbitmq] [--redis-url URL] [--amqp-url URL]

A fleet as capture meets it: a Celery worker started with ``-E`` consumes the queue (so every task
brings its received / started / succeeded events), and a producer publishes ``--tasks`` tasks a round
with a plain ``apply_async`` loop (Celery's client, as a producer of the fleet would). Per broker each
round runs every mode once, in a shuffled order, each after the worker emptied the queue:

- ``off``: ``task_send_sent_event = False``, nobody listening (the fleet as it was);
- ``listen``: the same with ``cmx capture`` listening (its default arrivals: task-sent where producers
  send it, else task-received; the producer's code and settings unchanged). **This is capture's cost.**
- ``sent``: ``task_send_sent_event = True``, nobody listening (Celery's own cost of exact send times:
  each send also publishes a task-sent event; a user's choice, not capture's);
- ``captured``: sent events with ``cmx capture`` listening.

``cmx capture`` is a process of its own, started before its round (the round waits for its first
progress line: its event queue is bound) and stopped with Ctrl-C after it.

In a fleet the producer, the broker, the workers and the capture run on hosts of their own. This
machine has two cores, so ``--pin P,R`` stands in for that: the producer (this process) alone on CPU P;
on CPU R the broker at ``nice -10`` and the worker and the capture at ``nice 19``, so the broker
answers the producer as soon as it asks however busy the worker and the capture keep CPU R (as a broker
on its own host would), and what the capture can still cost the producer is the broker's own work for
it: routing each event to one more queue (RabbitMQ) or subscriber (Redis). Redis is a redis-server this
script starts (pinned and reniced like that); RabbitMQ is the machine's own node: ``--pin-rabbitmq``
moves its threads to CPU R at nice -10 for the benchmark and puts their affinity and nice back after.

Printed per broker: each mode's median rate over the rounds (min-max) and the producer's own CPU per
task (this thread's user + system time); the rate ratios paired round by round (which hold when the
machine's speed drifts between rounds), as the median ratio with a 95 % bootstrap interval
(``scipy.stats.bootstrap``, percentile method, of the median of the paired log ratios); and whether the
cost of ``listen`` is shown to be at most 2 % (the interval's upper end of the cost at most 2 %).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from capture_toggle_report import mean_interval  # noqa: E402
from pinning import PinnedRabbit, own_redis, placed, put_back, stop_process  # noqa: E402

URLS = {"redis": "redis://127.0.0.1:6379/13", "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//"}
MODES = ("off", "listen", "sent", "captured")
PAIRS = (("listen", "off"), ("captured", "sent"), ("sent", "off"), ("captured", "off"))
TARGET = 0.02
READY_S = 30.0
DRAIN_S = 180.0
#: Every mode idles this long before it publishes (after its listener is ready): a process that just
#: slept is favoured by the scheduler on a loaded machine, so modes that wait for a listener must not be
#: the only ones that slept.
SETTLE_S = 1.5
APP = '''import os
from celery import Celery
app = Celery("capbench", broker=os.environ["CAPBENCH_URL"])
app.conf.update(task_default_queue=os.environ["CAPBENCH_QUEUE"], broker_connection_retry_on_startup=True)
@app.task(name="capbench.noop")
def noop(payload):
    return None
'''


def make_app(url: str, queue: str, sent_event: bool):
    from celery import Celery

    app = Celery(f"capbench-{uuid.uuid4().hex[:6]}", broker=url, set_as_current=False)
    app.conf.update(task_default_queue=queue, task_send_sent_event=sent_event, broker_connection_retry_on_startup=True)

    @app.task(name="capbench.noop", shared=False)
    def noop(payload):
        return None

    return app


def publish_rate(url: str, queue: str, tasks: int, sent_event: bool) -> tuple[float, float]:
    """(tasks a second, this thread's CPU seconds a task) of an apply_async loop."""
    import resource

    app = make_app(url, queue, sent_event)
    task = app.tasks["capbench.noop"]
    with app.producer_or_acquire() as producer:
        task.apply_async(("warm",), producer=producer)  # connection and declarations out of the timing
        cpu0 = resource.getrusage(resource.RUSAGE_THREAD)
        began = time.perf_counter()
        for _ in range(tasks):
            task.apply_async(("x" * 64,), producer=producer)
        rate = tasks / (time.perf_counter() - began)
        cpu1 = resource.getrusage(resource.RUSAGE_THREAD)
    return rate, (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / tasks


def queue_depth(url: str, queue: str) -> int:
    """Messages ready in ``queue`` (kombu's Redis transport says an empty queue does not exist)."""
    from kombu import Connection
    from kombu.exceptions import ChannelError

    with Connection(url) as conn:
        try:
            return conn.default_channel.queue_declare(queue, passive=True).message_count
        except ChannelError:
            return 0


class Worker:
    """``celery worker -E`` (threads pool, 4 threads) consuming the benchmark's queue, placed beside the broker."""

    def __init__(self, url: str, queue: str, scratch: Path, cpu: int | None):
        (scratch / "capbench_app.py").write_text(APP)
        env = {**os.environ, "CAPBENCH_URL": url, "CAPBENCH_QUEUE": queue, "PYTHONPATH": str(scratch)}
        cmd = [sys.executable, "-m", "celery", "-A", "capbench_app", "worker", "-E", "-P", "threads", "-c", "4"]
        cmd += ["-Q", queue, "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"]
        self.proc = subprocess.Popen(
            cmd, env=env, cwd=scratch, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=placed(cpu, 19)
        )
        self.url, self.queue = url, queue
        app = make_app(url, queue, False)
        app.tasks["capbench.noop"].apply_async(("ready",))
        try:
            self.drain()  # the worker consumes: it is up
        except BaseException:
            self.stop()
            raise

    def drain(self) -> None:
        deadline = time.monotonic() + DRAIN_S
        while queue_depth(self.url, self.queue):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not empty {self.queue} within {DRAIN_S:g} s")
            time.sleep(0.2)
        time.sleep(0.5)  # its last tasks' events out

    def stop(self) -> None:
        stop_process(self.proc)


class Capture:
    """``cmx capture`` in its own process; ready once it printed its first progress line."""

    def __init__(self, url: str, out: Path, cpu: int | None):
        env = {**os.environ, "CMX_CAPTURE_BROKER_URL": url, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cmx.cli.main", "capture", "--out", str(out), "--duration", "600"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=placed(cpu, 19),
        )
        self.err = ""
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()  # ends once ready: no CPU of the producer's
        if not self.ready.wait(READY_S):
            self.proc.kill()
            raise RuntimeError(f"cmx capture not listening within {READY_S:g} s: {self.err[-300:]!r}")

    def _read(self) -> None:
        while not self.ready.is_set() and (chunk := self.proc.stderr.read(1)):
            self.err += chunk
            if "capturing" in self.err:
                self.ready.set()

    def stop(self) -> int:
        """Ctrl-C, as a user ends a capture: the tasks it captured."""
        self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        last = out.strip().splitlines()[-1] if out.strip() else ""
        return int(last.split()[1].replace(",", "")) if last.startswith("captured") else 0


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """The median and its 95 % bootstrap interval (scipy.stats.bootstrap, percentile method)."""
    return mean_interval(values, statistic="median")


def interval(ratios: list[float]) -> tuple[float, float, float]:
    """The median paired ratio and its 95 % interval (of the median log ratio)."""
    return tuple(math.exp(v) for v in median_interval([math.log(r) for r in ratios]))


def run_broker(name: str, url: str, args, rng: random.Random, scratch: Path, rest_cpu: int | None) -> None:
    queue = f"capbench-{uuid.uuid4().hex[:8]}"
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    cpus: dict[str, list[float]] = {m: [] for m in MODES}
    captured = {"listen": 0, "captured": 0}
    worker = Worker(url, queue, scratch, rest_cpu)
    try:
        for _ in range(args.repeats):
            for mode in rng.sample(MODES, len(MODES)):
                worker.drain()
                cap = Capture(url, scratch / f"{name}.parquet", rest_cpu) if mode in captured else None
                try:
                    time.sleep(SETTLE_S)
                    rate, cpu = publish_rate(url, queue, args.tasks, mode in ("sent", "captured"))
                    rates[mode].append(rate)
                    cpus[mode].append(cpu)
                    if cap is not None:
                        worker.drain()  # the round's events all reach the capture before it stops
                finally:
                    if cap is not None:
                        captured[mode] += cap.stop()
    finally:
        worker.stop()
        from kombu import Connection

        with Connection(url) as conn:  # the benchmark's queue goes with it
            conn.default_channel.queue_delete(queue)
    report(name, args, rates, cpus, captured)


def report(name: str, args, rates, cpus, captured) -> None:
    base = statistics.median(rates["off"])
    print(
        f"-- {name}: {args.tasks} tasks a round, {args.repeats} rounds (modes shuffled in each), apply_async loop, "
        f"64-byte payload; a worker -E (threads, 4) consuming"
    )
    print(f"   {'mode':<9} {'median/s':>9} {'min-max/s':>17} {'vs off':>8}  {'producer CPU us/task, median':>28}")
    for mode in MODES:
        med = statistics.median(rates[mode])
        print(
            f"   {mode:<9} {med:>9,.0f} {min(rates[mode]):>8,.0f}-{max(rates[mode]):<8,.0f} "
            f"{(med / base - 1) * 100:>+7.1f}%  {statistics.median(cpus[mode]) * 1e6:>28.0f}"
        )
    print("   paired round by round: rate ratio median [95 % interval] (min-max); cost = 1 - ratio")
    costs = {}
    for a, b in PAIRS:
        ratios = [x / y for x, y in zip(rates[a], rates[b])]
        mid, low, high = interval(ratios)
        costs[a, b] = (1 - mid, 1 - high, 1 - low)
        print(
            f"     {a + '/' + b:<14} {mid:.3f} [{low:.3f}-{high:.3f}] ({min(ratios):.3f}-{max(ratios):.3f})  "
            f"cost {(1 - mid) * 100:+.1f} % [{(1 - high) * 100:+.1f} to {(1 - low) * 100:+.1f} %]"
        )
    print("   the producer's own CPU a task, paired (the same code runs in both: a ratio near 1 says so):")
    for a, b in (("listen", "off"), ("captured", "sent")):
        mid, low, high = interval([x / y for x, y in zip(cpus[a], cpus[b])])
        print(f"     {a + '/' + b:<14} {mid:.3f} [{low:.3f}-{high:.3f}]")
    # A task's time in the loop is the producer's own CPU plus its waiting (for the broker's reply, for
    # a core). What capture can change is the waiting; the CPU a task takes moves with this VM's speed
    # from round to round (the rates above), the waiting much less. Its change, paired round by round,
    # as a share of the task's whole time without capture:
    print("   the producer's waiting a task, paired: (wait with - wait without) / time a task without")
    waits = {m: [1 / r - c for r, c in zip(rates[m], cpus[m])] for m in MODES}
    for a, b in (("listen", "off"), ("captured", "sent")):
        shares = [(wa - wb) * rb for wa, wb, rb in zip(waits[a], waits[b], rates[b])]
        mid, low, high = median_interval(shares)
        costs[a, b, "wait"] = (mid, low, high)
        print(
            f"     {a + '/' + b:<14} {mid * 100:+.1f} % [{low * 100:+.1f} to {high * 100:+.1f} %]  "
            f"(waiting without: {statistics.median(waits[b]) * 1e6:.0f} us a task)"
        )
    for key, label in ((("listen", "off"), "rate"), (("listen", "off", "wait"), "waiting")):
        mid, _, worst = costs[key]
        print(
            f"   capture's cost to the producer by its {label} (listen/off): {mid * 100:+.1f} %, at most "
            f"{worst * 100:+.1f} % (95 %): {'within' if worst <= TARGET else 'NOT shown within'} {TARGET * 100:g} %"
        )
    print("   rounds (rate/s, producer CPU us a task):")
    for i in range(len(rates["off"])):
        print("     " + "  ".join(f"{m} {rates[m][i]:,.0f}/{cpus[m][i] * 1e6:.0f}" for m in MODES))
    sent = args.repeats * args.tasks
    print(
        f"   tasks captured: listen rounds {captured['listen']:,}, captured rounds {captured['captured']:,} "
        f"of {sent:,} each"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=16)
    ap.add_argument("--brokers", default="redis,rabbitmq")
    ap.add_argument("--pin", default=None, metavar="P,R", help="the producer's CPU, and the CPU of everything else")
    ap.add_argument("--pin-rabbitmq", action="store_true", help="move the machine's RabbitMQ node to R meanwhile")
    ap.add_argument("--redis-url", default=None, help="a Redis to use instead of a redis-server of the benchmark's own")
    ap.add_argument("--amqp-url", default=URLS["rabbitmq"])
    args = ap.parse_args()
    if args.repeats < 2:
        ap.error("--repeats: at least 2 (an interval needs two rounds)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a killed benchmark still puts RabbitMQ back
    producer_cpu, rest_cpu = (int(c) for c in args.pin.split(",")) if args.pin else (None, None)
    rng = random.Random(1)
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"capbench-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    urls = {"redis": args.redis_url, "rabbitmq": args.amqp_url}
    server = rabbit = None
    if not args.redis_url and "redis" in args.brokers:
        server, urls["redis"] = own_redis(rest_cpu)
    if args.pin_rabbitmq and rest_cpu is not None and "rabbitmq" in args.brokers:
        rabbit = PinnedRabbit(rest_cpu)
    if producer_cpu is not None:
        os.sched_setaffinity(0, {producer_cpu})
    print(
        f"# pinned: producer CPU {producer_cpu}; broker (nice -10), worker and capture (nice 19) CPU {rest_cpu}"
        if args.pin
        else "# not pinned",
        f"; redis {'own server' if server else 'given'}; rabbitmq {'pinned' if rabbit else 'as it runs'}"
        f"; load average at start {os.getloadavg()[0]:.1f}",
    )
    try:
        for name in args.brokers.split(","):
            run_broker(name, urls[name], args, rng, scratch, rest_cpu)
    finally:
        put_back(server, rabbit)
    print(f"# load average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

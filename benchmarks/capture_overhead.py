"""What capturing costs a producer (issue 40 point 5: at most 2 % of its throughput).

    python benchmarks/capture_overhead.py [--tasks 3000] [--repeats 7] [--brokers redis,rabbitmq]
        [--pin 0,1] [--own-redis] [--redis-url URL] [--amqp-url URL]

Per broker, each round publishes ``--tasks`` tasks with a plain ``apply_async`` loop (Celery's
client, as a producer of the fleet would) once in each mode, in a shuffled order (so the modes are
interleaved round by round), into an emptied queue that nothing consumes:

- ``off``: ``task_send_sent_event = False``, nobody listening (the producer as it was);
- ``listen``: the same with ``cmx capture`` listening (the capture without sent events: arrivals
  from the workers' ``task-received``; the producer's setting is unchanged);
- ``sent``: ``task_send_sent_event = True``, nobody listening (Celery's own cost: each send also
  publishes a task-sent event);
- ``captured``: sent events with ``cmx capture`` listening;
- ``rawsub`` (Redis only): sent events with ``redis-cli PSUBSCRIBE`` reading them instead (a C client that
  only prints them, to /dev/null): what one more pub/sub subscriber costs Redis and so the producer,
  apart from what cmx capture does with each event.

``cmx capture`` is a separate process, started before its round (the round waits for its first
progress line: its event queue is bound) and stopped with Ctrl-C after it. ``--pin P,L`` pins this
process (the producer) to CPU P and the capture (and with ``--own-redis`` a redis-server this script
starts on a free port) to CPU L, so the producer does not share its core with them; other processes
of the machine still may. Printed per broker: each mode's median rate over the rounds (min-max), its
change against ``off``, and the ratios paired round by round (``listen``/``off``,
``captured``/``sent``, ``captured``/``off``: median and min-max), which hold when the machine's speed
drifts between rounds, and the producer's own CPU per task (this thread's user + system time): a
listener that slows the producer without changing that slows it by contention (for cores, or for the
broker, which a Redis producer waits for on every publish). In ``listen`` mode nothing here sends
task events (no workers run): the listener idles; what it does per event is what ``captured`` adds
over ``sent``.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

URLS = {"redis": "redis://127.0.0.1:6379/13", "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//"}
MODES = ("off", "listen", "sent", "captured", "rawsub")
PAIRS = (("listen", "off"), ("captured", "sent"), ("rawsub", "sent"), ("captured", "off"), ("sent", "off"))
TARGET = 0.02
READY_S = 30.0
#: Every mode idles this long before it publishes (after its listener is ready): a process that just
#: slept is favoured by the scheduler on a loaded machine, so modes that wait for a listener must not be
#: the only ones that slept (a first version's Redis rounds with a subscriber ran up to 40 % faster).
SETTLE_S = 1.5


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
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)
    return rate, (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / tasks


class RawSubscriber:
    """``redis-cli PSUBSCRIBE '*'`` on the broker, its output thrown away (pinned like the capture)."""

    def __init__(self, url: str, cpu: int | None):
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
        self.proc = subprocess.Popen(
            ["redis-cli", "-h", parts.hostname, "-p", str(parts.port or 6379), "PSUBSCRIBE", "*"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=pin,
        )
        time.sleep(0.5)  # subscribed (and SETTLE_S follows)

    def stop(self) -> tuple[int, float, bool]:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        return 0, 0.0, True


class Capture:
    """``cmx capture`` in its own process; ready once it printed its first progress line."""

    def __init__(self, url: str, out: Path, cpu: int | None):
        env = {**os.environ, "CMX_CAPTURE_BROKER_URL": url, "PYTHONPATH": str(REPO)}

        def pin():  # its Ctrl-C must work even where this benchmark was started with SIGINT ignored (`cmd &`)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cmx.cli.main", "capture", "--out", str(out), "--duration", "600"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=pin,
        )
        self.err = ""
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()  # ends once ready: no CPU of the producer's
        if not self.ready.wait(READY_S):
            self.proc.kill()
            raise RuntimeError(f"cmx capture not listening within {READY_S:g} s: {self.err[-300:]!r}")
        self.cpu0 = self._cpu()

    def _read(self) -> None:
        while not self.ready.is_set() and (chunk := self.proc.stderr.read(1)):
            self.err += chunk
            if "capturing" in self.err:
                self.ready.set()

    def _cpu(self) -> float:
        import psutil

        t = psutil.Process(self.proc.pid).cpu_times()
        return t.user + t.system

    def stop(self) -> tuple[int, float, bool]:
        """Ctrl-C, as a user ends a capture: (tasks captured, CPU s used listening, still listening at the end)."""
        alive = self.proc.poll() is None
        cpu = self._cpu() - self.cpu0 if alive else 0.0
        self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        last = out.strip().splitlines()[-1] if out.strip() else ""
        return (int(last.split()[1].replace(",", "")) if last.startswith("captured") else 0), cpu, alive


def own_redis(cpu: int | None) -> tuple[subprocess.Popen, str]:
    """A redis-server of this benchmark's own on a free loopback port (pinned to ``cpu``), nothing persisted."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pin)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("own redis-server did not answer within 10 s")


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def run_broker(name: str, url: str, args, rng: random.Random, scratch: Path, listen_cpu: int | None) -> None:
    queue = f"capbench-{uuid.uuid4().hex[:8]}"
    modes = [m for m in MODES if m != "rawsub" or name == "redis"]
    rates: dict[str, list[float]] = {m: [] for m in modes}
    cpus: dict[str, list[float]] = {m: [] for m in modes}
    captured = expected = 0
    cpu_s, events, dropped = 0.0, 0, 0
    for _ in range(args.repeats):
        for mode in rng.sample(modes, len(modes)):
            cap = (
                Capture(url, scratch / f"{name}.parquet", listen_cpu)
                if mode in ("listen", "captured")
                else (RawSubscriber(url, listen_cpu) if mode == "rawsub" else None)
            )
            try:
                time.sleep(SETTLE_S)
                rate, cpu = publish_rate(url, queue, args.tasks, mode in ("sent", "captured", "rawsub"))
                rates[mode].append(rate)
                cpus[mode].append(cpu)
            finally:
                if cap is not None:
                    n, used, alive = cap.stop()
                    dropped += not alive
                    if mode == "captured":
                        captured, expected, cpu_s, events = (
                            captured + n,
                            expected + args.tasks + 1,
                            cpu_s + used,
                            events + n,
                        )
    base = statistics.median(rates["off"])
    print(
        f"-- {name}: {args.tasks} tasks a round, {args.repeats} rounds (modes shuffled in each), apply_async loop, "
        f"64-byte payload"
    )
    print(f"   {'mode':<9} {'median/s':>9} {'min-max/s':>17} {'vs off':>8}  {'producer CPU us/task, median':>28}")
    for mode in modes:
        med = statistics.median(rates[mode])
        print(
            f"   {mode:<9} {med:>9,.0f} {min(rates[mode]):>8,.0f}-{max(rates[mode]):<8,.0f} "
            f"{(med / base - 1) * 100:>+7.1f}%  {statistics.median(cpus[mode]) * 1e6:>28.0f}"
        )
    print("   paired round by round, rate ratio median (min-max); 1 - ratio is the cost:")
    for a, b in PAIRS:
        if a not in modes:
            continue
        ratios = [x / y for x, y in zip(rates[a], rates[b])]
        print(f"     {a + '/' + b:<14} {spread(ratios)}  cost {(1 - statistics.median(ratios)) * 100:+.1f} %")
    listen = 1 - statistics.median([x / y for x, y in zip(rates["listen"], rates["off"])])
    full = 1 - statistics.median([x / y for x, y in zip(rates["captured"], rates["off"])])
    print(
        f"   capture without sent events (listen) costs the producer {listen * 100:+.1f} %, with sent events "
        f"(captured) {full * 100:+.1f} % (target at most {TARGET * 100:g} %)"
    )
    print(
        f"   tasks captured in 'captured' rounds: {captured:,} of {expected:,} sent (a warm-up task a round); "
        f"cmx capture used {cpu_s:.2f} CPU s listening to them ({cpu_s / max(events, 1) * 1e6:.0f} us an event)"
        + (f"; {dropped} capture(s) had stopped before their round ended" if dropped else "")
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--brokers", default="redis,rabbitmq")
    ap.add_argument("--pin", default=None, metavar="P,L", help="producer's CPU, capture's (and own redis') CPU")
    ap.add_argument("--own-redis", action="store_true", help="start a redis-server of its own (pinned with --pin)")
    ap.add_argument("--redis-url", default=URLS["redis"])
    ap.add_argument("--amqp-url", default=URLS["rabbitmq"])
    args = ap.parse_args()
    producer_cpu, listen_cpu = (int(c) for c in args.pin.split(",")) if args.pin else (None, None)
    rng = random.Random(1)
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"capbench-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    urls = {"redis": args.redis_url, "rabbitmq": args.amqp_url}
    server = None
    if args.own_redis:
        server, urls["redis"] = own_redis(listen_cpu)
    if producer_cpu is not None:
        os.sched_setaffinity(0, {producer_cpu})
    print(
        f"# pinned: producer CPU {producer_cpu}, capture CPU {listen_cpu}" if args.pin else "# not pinned",
        f"; redis {'own server' + (f' on CPU {listen_cpu}' if args.pin else '') if server else 'shared server'}"
        f"; load average at start {os.getloadavg()[0]:.1f}",
    )
    try:
        for name in args.brokers.split(","):
            run_broker(name, urls[name], args, rng, scratch, listen_cpu)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
    print(f"# load average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

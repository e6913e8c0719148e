"""What capturing costs a producer's throughput, from many short alternating windows (issue 40 point 5).

    python benchmarks/capture_toggle.py [--brokers redis,rabbitmq] [--pairs 200] [--window 1.0]
        [--pin 0,1] [--pin-rabbitmq] [--sent-events] [--task-sleep S] [--json FILE]

capture_overhead.py compares whole rounds seconds apart; on a VM whose speed moves by a third between
adjacent rounds its rate intervals stay 8-16 points wide. Here one producer publishes without a break
while a capture attaches to and detaches from the broker in windows of ``--window`` s, ``off`` and
``listen`` in a random order in each pair: each pair's ratio is taken over seconds side by side, so the
machine's drift cancels and the interval narrows as pairs add up.

- The producer: Celery's ``apply_async`` loop (64-byte payload), a process alone on CPU P, noting the
  time and its own CPU time every 20 tasks.
- The fleet: a Celery worker ``-E`` (threads, 4) consuming at nice 10 on CPU R. It falls behind the
  producer, so it keeps CPU R busy in every window (the queue is kept to its newest 20,000: RabbitMQ's
  ``x-max-length``, an ``LTRIM`` between pairs on Redis). Each task it runs brings received / started /
  succeeded events; ``--sent-events`` adds the producer's task-sent events.
- The capture: cmx capture's own listener (``Recorder`` and the batched read of
  ``cmx.engine.replay.capture``) at nice 19 on CPU R, connecting, binding its event queue and consuming
  when told to attach, cancelling and closing its connection when told to detach. A ``listen`` window
  runs from its first task event to the detach; an ``off`` window starts once its connection is closed.
- The broker on CPU R at nice -10 (a redis-server of this benchmark's own; the machine's RabbitMQ with
  ``--pin-rabbitmq``, put back after): it answers the producer at once however busy CPU R is.

Printed per broker: each kind of window's rate, the producer's CPU a task, the worker's CPU share and
CPU R's idle share; the paired ratio listen/off as the geometric mean with a 95 % BCa bootstrap interval
(``scipy.stats.bootstrap``), and whether the cost (1 - ratio) is at most 2 % at its interval's upper end;
the same scaled to a fleet whose workers keep up (3 events a task, 4 with sent events), as the broker's
work for a capture is per event (the capture's received events undercount what was routed to it when it
lags, so the scale is an upper one).
"""

from __future__ import annotations

import argparse
import json
import os
import queue as queues
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from capture_overhead import URLS  # noqa: E402
from pinning import PinnedRabbit, own_redis, placed, put_back, rabbit_node, stop_process  # noqa: E402
from capture_toggle_report import per_window, report  # noqa: E402

KEEP = 20_000
WARM_S = 5.0
ANSWER_S = 30.0
EVERY = 20
APP = (
    """import os, time
from celery import Celery
from kombu import Queue
app = Celery("capbench", broker=os.environ["CAPBENCH_URL"])
q = os.environ["CAPBENCH_QUEUE"]
app.conf.update(task_default_queue=q, broker_connection_retry_on_startup=True,
                task_queues=[Queue(q, routing_key=q, queue_arguments={"x-max-length": %d})],
                task_send_sent_event=os.environ.get("CAPBENCH_SENT") == "1")
@app.task(name="capbench.noop")
def noop(payload):
    time.sleep(float(os.environ.get("CAPBENCH_SLEEP", "0")))
"""
    % KEEP
)


def scratch_app(scratch: Path, url: str, queue: str, args) -> dict:
    """The environment for a process importing the benchmark's app (``capbench_app``)."""
    (scratch / "capbench_app.py").write_text(APP)
    own = {"CAPBENCH_URL": url, "CAPBENCH_QUEUE": queue, "CAPBENCH_SENT": "1" if args.sent_events else "0"}
    own |= {"CAPBENCH_SLEEP": str(args.task_sleep), "PYTHONPATH": f"{scratch}{os.pathsep}{REPO}"}
    return {**os.environ, **own}


def child_producer(out: str, rate: float) -> None:
    """Publish until stdin closes, ``rate`` tasks a second (0: as fast as it can); every EVERY tasks the
    time, this thread's CPU time, the count, and the time spent inside apply_async."""
    from capbench_app import app

    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    task = app.tasks["capbench.noop"]
    marks: list[tuple[float, float, int, float]] = []
    with app.producer_or_acquire() as producer:
        task.apply_async(("warm",), producer=producer)
        n, busy, gap, due = 0, 0.0, 1 / rate if rate else 0.0, time.monotonic()
        while not done.is_set():
            for _ in range(EVERY):
                if gap:
                    due += gap
                    time.sleep(max(0.0, due - time.monotonic()))
                began = time.monotonic()
                task.apply_async(("x" * 64,), producer=producer)
                busy += time.monotonic() - began
            n += EVERY
            marks.append((time.monotonic(), time.thread_time(), n, busy))
    Path(out).write_text(json.dumps(marks))


def child_capture(url: str) -> None:
    """cmx capture's listener, attached and detached on command (stdin): ``attached T`` once its first
    event arrived, ``detached T EVENTS`` once its connection is closed."""
    import socket

    from celery import Celery

    from cmx.engine.replay.capture import BATCH_S, Recorder, _read_batch

    app = Celery("cmx-capture", broker=url, set_as_current=False)
    print("ready", flush=True)
    commands: queues.Queue[str] = queues.Queue()

    def read() -> None:
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("quit")

    threading.Thread(target=read, daemon=True).start()
    while commands.get() == "attach":
        rec, first = Recorder(), None
        with app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=3)
            consumers = app.events.Receiver(conn, handlers={"*": rec}).get_consumers(
                conn.Consumer, conn.default_channel
            )
            for c in consumers:
                c.consume()
            while commands.empty():
                if _read_batch(conn, socket.timeout):
                    if first is None and rec.events:
                        first = time.monotonic()
                        print("attached", first, flush=True)
                    time.sleep(BATCH_S)
            for c in consumers:
                c.cancel()
        print("detached", time.monotonic(), rec.events, flush=True)
        if commands.get() != "detach":
            break


class Child:
    """A child process of this script on ``cpu`` at ``nice``, its output lines readable with a bound."""

    def __init__(self, args: list[str], env: dict, cpu, nice: int, cwd: Path):
        cmd = [sys.executable, __file__, "--child", *args]
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=placed(cpu, nice),
        )
        self.lines: queues.Queue[str] = queues.Queue()
        threading.Thread(target=lambda: [self.lines.put(x) for x in self.proc.stdout], daemon=True).start()

    def ask(self, command: str | None, expect: str, within: float = ANSWER_S) -> list[str]:
        if command is not None:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        try:
            words = self.lines.get(timeout=within).split()
        except queues.Empty:
            raise RuntimeError(f"{command}: no answer within {within:g} s") from None
        if words[0] != expect:
            raise RuntimeError(f"{command}: {words}")
        return words

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop_process(self.proc)


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_seconds(cpu: int) -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            return (int(line.split()[4]) + int(line.split()[5])) / os.sysconf("SC_CLK_TCK")
    raise RuntimeError(f"cpu{cpu} not in /proc/stat")


def trim(url: str, queue: str) -> None:
    """Redis: the queue kept to its newest KEEP messages (RabbitMQ drops the oldest itself)."""
    if url.startswith("redis"):
        import redis

        redis.Redis.from_url(url).ltrim(queue, 0, KEEP - 1)


def window(state: str, capture: "Child", pids: dict, cpu, seconds: float) -> dict:
    """One window: its bounds, the worker's and the broker's CPU seconds and CPU R's idle seconds in it, the
    events captured."""

    def probe() -> dict:
        return {k: cpu_seconds(pid) for k, pid in pids.items()} | {"idle": idle_seconds(cpu) if cpu is not None else 0}

    t0 = float(capture.ask("attach", "attached")[1]) if state == "listen" else time.monotonic()
    before = probe()
    time.sleep(max(0.0, t0 + seconds - time.monotonic()))
    t1, after = time.monotonic(), probe()
    events = int(capture.ask("detach", "detached")[2]) if state == "listen" else 0
    return {"state": state, "t0": t0, "t1": t1, "events": events} | {k: after[k] - before[k] for k in after}


def run_broker(name: str, url: str, broker: int, args, rng: random.Random, scratch: Path, cpus) -> dict:
    producer_cpu, rest_cpu = cpus
    queue = f"capbench-{uuid.uuid4().hex[:8]}"
    env = scratch_app(scratch, url, queue, args)
    worker_cmd = [sys.executable, "-m", "celery", "-A", "capbench_app", "worker", "-E", "-P", "threads", "-c", "4"]
    worker_cmd += ["-Q", queue, "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "error"]
    marks = scratch / f"{name}-marks.json"
    windows, children, worker = [], [], None
    try:
        capture_cpu = rest_cpu if args.capture_cpu is None else args.capture_cpu
        children.append(capture := Child(["capture", url], env, capture_cpu, args.capture_nice, scratch))
        capture.ask(None, "ready", within=120.0)  # imported (at nice 19 that can take a while)
        worker = subprocess.Popen(
            worker_cmd, env=env, cwd=scratch, stdout=subprocess.DEVNULL, preexec_fn=placed(rest_cpu, 10)
        )
        children.append(producer := Child(["producer", str(marks), str(args.rate)], env, producer_cpu, 0, scratch))
        time.sleep(WARM_S)
        for pair in range(args.pairs):
            for state in rng.sample(("off", "listen"), 2):
                windows.append(
                    {"pair": pair}
                    | window(state, capture, {"worker": worker.pid, "broker": broker}, rest_cpu, args.window)
                )
            trim(url, queue)
            if producer.proc.poll() is not None or worker.poll() is not None:
                raise RuntimeError("the producer or the worker ended before the windows did")
        producer.proc.stdin.close()  # stop
        if producer.proc.wait(timeout=60) != 0:
            raise RuntimeError("the producer failed")
    finally:
        for child in children:
            child.stop()
        if worker is not None:
            stop_process(worker)
        from kombu import Connection

        with Connection(url) as conn:
            conn.default_channel.queue_delete(queue)
    return {"windows": windows, "marks": json.loads(marks.read_text())}


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, rest = sys.argv[2], sys.argv[3:]
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        if kind == "producer":
            child_producer(rest[0], float(rest[1]))
        else:
            child_capture(rest[0])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="redis,rabbitmq")
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--window", type=float, default=1.0, help="seconds a window")
    ap.add_argument("--pin", default=None, metavar="P,R", help="the producer's CPU, and the CPU of everything else")
    ap.add_argument("--pin-rabbitmq", action="store_true", help="move the machine's RabbitMQ node to R meanwhile")
    ap.add_argument("--sent-events", action="store_true", help="the producer sends task-sent events too")
    ap.add_argument("--rate", type=float, default=0.0, help="tasks a second the producer offers (0: flat out)")
    ap.add_argument("--capture-nice", type=int, default=19, help="the capture's nice on CPU R (the worker's: 10)")
    ap.add_argument("--capture-cpu", type=int, default=None, help="the capture's CPU (default R, the broker's)")
    ap.add_argument("--task-sleep", type=float, default=0.0, help="seconds each task sleeps in the worker")
    ap.add_argument("--amqp-url", default=URLS["rabbitmq"])
    ap.add_argument("--json", default=None, metavar="FILE", help="also write every window here")
    ap.add_argument("--report", default=None, metavar="FILE", help="print the report of a --json FILE, run nothing")
    args = ap.parse_args()
    if args.report:
        for name, rows in json.loads(Path(args.report).read_text()).items():
            report(name, args, rows)
        return 0
    if args.pairs < 10:
        ap.error("--pairs: at least 10")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a killed benchmark still puts RabbitMQ back
    cpus = tuple(int(c) for c in args.pin.split(",")) if args.pin else (None, None)
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"captoggle-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    server = rabbit = None
    urls = {"rabbitmq": args.amqp_url}
    if "redis" in args.brokers:
        server, urls["redis"] = own_redis(cpus[1])
    if args.pin_rabbitmq and cpus[1] is not None and "rabbitmq" in args.brokers:
        rabbit = PinnedRabbit(cpus[1])
    pids = {"redis": server.pid if server else None}
    pids["rabbitmq"] = rabbit_node().pid if "rabbitmq" in args.brokers else None
    if cpus[1] is not None:
        os.sched_setaffinity(0, {cpus[1]})  # this controller sleeps beside the broker, off the producer's CPU
    print(
        f"# pin {args.pin or 'none'}; redis own server; rabbitmq {'pinned' if rabbit else 'as it runs'}; "
        f"load average at start {os.getloadavg()[0]:.1f}"
    )
    every = {}
    try:
        for name in args.brokers.split(","):
            rows = per_window(run_broker(name, urls[name], pids[name], args, random.Random(1), scratch, cpus))
            every[name] = rows
            report(name, args, rows)
    finally:
        put_back(server, rabbit)
    if args.json:
        Path(args.json).write_text(json.dumps(every))
    print(f"# load average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

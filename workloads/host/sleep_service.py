"""The slow HTTP service the ``io_chord`` tasks call (the study's FastAPI "webserver", stdlib only).

``python -m cmx.workloads.host.sleep_service --port PORT`` (started by ``hostctl start-service`` with the run
dir as cwd) serves:

- ``GET /sleep?id=ID&min=S&max=S``: sleeps a random time in [min, max] seconds, then answers
  ``{"id", "slept_s", "started_at", "finished_at"}``. The caller sends min and max, so the service
  needs no configuration of its own.
- ``GET /stats``: ``{"requests": N, "distinct_ids": M}`` over the requests answered so far, the
  service's own count (the driver reports it, independent of what the tasks say).

Every answered request is recorded in memory and written to ``service-requests.csv`` in the cwd
(fetched with the run's artifacts): every second when something changed, and on SIGTERM/SIGINT
(how ``hostctl stop`` ends it). Each request has a thread (daemon: stop never waits for a sleeper).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from cmx.workloads.runtime.files import write_atomic

CSV_NAME = "service-requests.csv"
CSV_HEADER = ("id", "slept_s", "started_at", "finished_at")
FLUSH_INTERVAL_S = 1.0


class RequestLog:
    """The answered requests, in memory; written whole (atomically) to a CSV file."""

    def __init__(self, path: Path):
        self.path = path
        self._rows: list[tuple[str, float, float, float]] = []
        self._lock = threading.Lock()
        self._written = -1

    def add(self, row: tuple[str, float, float, float]) -> None:
        with self._lock:
            self._rows.append(row)

    def stats(self) -> dict:
        with self._lock:
            return {"requests": len(self._rows), "distinct_ids": len({r[0] for r in self._rows})}

    def write(self) -> None:
        with self._lock:
            rows = list(self._rows)
        if len(rows) == self._written:
            return
        out = io.StringIO()
        w = csv.writer(out)
        w.writerow(CSV_HEADER)
        w.writerows(rows)
        write_atomic(self.path, out.getvalue())
        self._written = len(rows)

    def write_forever(self) -> None:
        while True:
            time.sleep(FLUSH_INTERVAL_S)
            self.write()


class Handler(BaseHTTPRequestHandler):
    server: "SleepServer"

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if url.path == "/stats":
            return self._answer(200, self.server.log.stats())
        if url.path != "/sleep":
            return self._answer(404, {"error": f"no such path: {url.path}"})
        try:
            low, high = float(query.get("min", 180)), float(query.get("max", 210))
            if not 0 <= low <= high:
                raise ValueError(f"need 0 <= min <= max, got {low}, {high}")
        except ValueError as exc:
            return self._answer(400, {"error": str(exc)})
        started = time.time()
        slept = random.uniform(low, high)
        time.sleep(slept)
        finished = time.time()
        row = (query.get("id", ""), slept, started, finished)
        self.server.log.add(row)  # before answering: once the caller has its answer, /stats counts it
        self._answer(200, dict(zip(CSV_HEADER, row)))

    def log_message(self, format: str, *args) -> None:  # one line per request would drown service.log
        pass


class SleepServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # up to hundreds of concurrent callers (a gevent worker at concurrency 1000)

    def __init__(self, address: tuple[str, int], log: RequestLog):
        super().__init__(address, Handler)
        self.log = log


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m cmx.workloads.host.sleep_service",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--bind", default="0.0.0.0", help="address to listen on (all: workers may be other hosts)")
    args = ap.parse_args(argv)
    log = RequestLog(Path.cwd() / CSV_NAME)
    log.write()  # the artifact exists (header only) even if no request ever comes

    def on_signal(signum, frame):
        log.write()
        sys.stdout.flush()
        os._exit(0)  # sleeping request threads are daemons; nothing else to wait for

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = SleepServer((args.bind, args.port), log)
    threading.Thread(target=log.write_forever, name="flush", daemon=True).start()
    print(f"sleep_service listening on {args.bind}:{args.port}", flush=True)
    server.serve_forever(poll_interval=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

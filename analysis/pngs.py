"""The report's PNGs, rasterised by vl-convert in worker processes while the report does the rest.

One vl-convert engine draws one chart at a time (threads queue on it), and starting it costs about
half a CPU-second; a report of nine charts at 100 cells spent half its time here
(benchmarks/cells100.py). So :class:`Painter` starts its workers first (``python -m
cmx.analysis.pngs``: vl-convert and nothing of cmx's), they warm their engines while the report
queries and builds charts, and each takes the next chart as soon as it has written the last.
The bytes are ``vl_convert.vegalite_to_png(spec, scale=SCALE)``'s, as when the report drew them itself.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SCALE = 1.5
WORKERS = 2  # at most; never more than the machine's cores
CHART_TIMEOUT_S = 300  # a chart not drawn by then fails the report (the worker is killed)


def render(spec: dict) -> bytes:
    import vl_convert

    return vl_convert.vegalite_to_png(spec, scale=SCALE)


class PngError(RuntimeError):
    """A worker failed or drew nothing in time: names the chart and the worker's last words."""


class Painter:
    """``paint(spec, path)`` queues a chart; ``wait()`` returns when every PNG is written (or raises
    :class:`PngError`); used as a context manager it stops its workers however the report ends."""

    def __init__(self, workers: int | None = None):
        count = max(1, min(WORKERS, os.cpu_count() or 1) if workers is None else workers)
        self._jobs: queue.Queue = queue.Queue()
        self._errors: list[str] = []
        self._queued = 0
        self._procs, self._threads, self._logs = [], [], []
        for _ in range(count):
            log = tempfile.TemporaryFile()  # a file, not a pipe: a chatty worker never blocks on it
            proc = subprocess.Popen(
                [sys.executable, "-m", "cmx.analysis.pngs"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            thread = threading.Thread(target=self._feed, args=(proc, log), daemon=True)
            self._procs.append(proc)
            self._logs.append(log)
            self._threads.append(thread)
            thread.start()

    def paint(self, spec: dict, path: Path) -> None:
        self._queued += 1
        self._jobs.put((json.dumps({"spec": spec, "path": str(path)}), path))

    def _feed(self, proc: subprocess.Popen, log) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            line, path = job
            timer = threading.Timer(CHART_TIMEOUT_S, proc.kill)
            timer.start()
            try:
                proc.stdin.write(line + "\n")
                proc.stdin.flush()
                answer = proc.stdout.readline().strip()
            except OSError:
                answer = ""
            finally:
                timer.cancel()
            if answer != "ok":
                log.seek(0)
                words = log.read().decode(errors="replace").strip().splitlines()[-3:]
                self._errors.append(f"{path.name}: {answer or 'the PNG worker ended'} {' '.join(words)}".strip())
                break
        try:
            proc.stdin.close()
        except OSError:
            pass

    def wait(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:  # each chart is bounded by its timer: so is the whole
            thread.join(CHART_TIMEOUT_S * (self._queued + 1))
        self.close()
        if self._errors or any(t.is_alive() for t in self._threads):
            raise PngError("a chart's PNG was not drawn: " + "; ".join(self._errors or ["timed out"]))

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        for log in self._logs:
            log.close()

    def __enter__(self) -> "Painter":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None:
            for proc in self._procs:
                proc.kill()
        self.close()


def _serve() -> None:
    """The worker: warm the engine, then for each line ``{"spec", "path"}`` on stdin write the PNG
    (whole or not at all) and answer ``ok`` on stdout."""
    import vl_convert

    vl_convert.vegalite_to_svg({"mark": "point"})  # starts the engine before the first chart arrives
    for line in sys.stdin:
        job = json.loads(line)
        path = Path(job["path"])
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(render(job["spec"]))
            tmp.replace(path)
        except Exception as exc:  # said to the report, which fails naming the chart
            print(f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", flush=True)
            tmp.unlink(missing_ok=True)
            continue
        print("ok", flush=True)


if __name__ == "__main__":
    _serve()

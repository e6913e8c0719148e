"""``io_chord``: chords of slow HTTP calls plus a summarize callback (reference/io-bound-pools-chords.md).

Each header task ``cmx.io_chord.waitinate`` calls the run's sleep service
(``workloads/host/sleep_service.py``, started on the first ``services`` host), which sleeps a random
``sleep_min_s``..``sleep_max_s`` seconds before answering; the callback ``cmx.io_chord.summarize``
adds up its header's answers. The study's producer sent two chords, of 7 and 3 header tasks: 10
long I/O-bound tasks, so the makespan falls with concurrency until it reaches 10 and then stays
at about one sleep.

Metrics it adds: ``chords_makespan_s`` (last header task's finish minus first header task's start,
task-side stamps, the study's "total time"; the standard ``makespan_s`` also spans the callbacks),
``header_tasks`` (header answers the callbacks saw), ``service_requests`` and
``service_distinct_ids`` (the service's own count of answered requests), ``service_slept_s``
(the sleeps it chose, summed: the work a perfectly parallel run would overlap).
"""

from __future__ import annotations

import functools
import json
import time
import urllib.request
from urllib.parse import urlencode

from pydantic import Field, field_validator

from cmx.workloads.catalog.base import DriveTimeout, Workload, WorkloadParams
from cmx.workloads.vocab import metrics as M


class IoChordParams(WorkloadParams):
    chords: list[int] = Field(default_factory=lambda: [7, 3], description="header size of each chord, in order")
    sleep_min_s: float = Field(180.0, ge=0, description="shortest sleep of the service per request")
    sleep_max_s: float = Field(210.0, ge=0, description="longest sleep of the service per request")

    @field_validator("chords")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        if not v or any(n < 1 for n in v):
            raise ValueError("chords must be a non-empty list of header sizes >= 1")
        return v

    @field_validator("sleep_max_s")
    @classmethod
    def _order(cls, v: float, info) -> float:
        if v < info.data.get("sleep_min_s", 0):
            raise ValueError("sleep_max_s must be >= sleep_min_s")
        return v


# No proxy: the service is the run's own, and an http_proxy in a host's environment must not reroute it.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@functools.lru_cache(maxsize=1)
def service_url() -> str:
    """The run's service URL, from the spec in the run dir (read once per process)."""
    from cmx.workloads.runtime.spec import RunSpec, run_dir_from_env

    url = RunSpec.load(run_dir_from_env()).service_url
    if not url:
        raise RuntimeError("the run spec has no service_url (the engine starts no service for this workload?)")
    return url


def call(path: str, timeout: float) -> dict:
    """GET ``path`` from the service, JSON back (cooperative in gevent/eventlet workers: they patch sockets)."""
    with _OPENER.open(service_url() + path, timeout=timeout) as resp:
        return json.load(resp)


class IoChord(Workload):
    name = "io_chord"
    Params = IoChordParams
    smoke_params = {"chords": [2], "sleep_min_s": 0.1, "sleep_max_s": 0.2}
    needs_backend = True  # a chord's callback needs its header's results
    service_module = "cmx.workloads.host.sleep_service"
    objective = M.CHORDS_MAKESPAN_S
    headline_metrics = (
        M.MAKESPAN_S,
        M.PEAK_PSS_BYTES,
        M.PEAK_RSS_BYTES,
        M.BROKER_CONNECTIONS_MAX,
        M.BACKEND_CONNECTIONS_MAX,
    )

    def register_tasks(self, app):
        @app.task(name="cmx.io_chord.waitinate", shared=False)
        def waitinate(request_id: str, sleep_min_s: float, sleep_max_s: float) -> dict:
            started = time.time()
            query = urlencode({"id": request_id, "min": sleep_min_s, "max": sleep_max_s})
            answer = call(f"/sleep?{query}", timeout=sleep_max_s + 60)
            return {**answer, "task_started_at": started, "task_finished_at": time.time()}

        @app.task(name="cmx.io_chord.summarize", shared=False)
        def summarize(results: list[dict]) -> dict:
            return {
                "count": len(results),
                "slept_s": sum(r["slept_s"] for r in results),
                "first_started_at": min(r["task_started_at"] for r in results),
                "last_finished_at": max(r["task_finished_at"] for r in results),
            }

    def drive(self, ctx, params: IoChordParams):
        from celery import chord
        from celery.exceptions import TimeoutError as CeleryTimeout

        waitinate = ctx.app.tasks["cmx.io_chord.waitinate"]
        summarize = ctx.app.tasks["cmx.io_chord.summarize"]
        ctx.wait_for_workers()
        ctx.start_consuming()
        results = []
        for c, size in enumerate(params.chords):
            header = [waitinate.s(f"{c}-{i}", params.sleep_min_s, params.sleep_max_s) for i in range(size)]
            results.append(chord(header)(summarize.s()))
        summaries = []
        for c, result in enumerate(results):
            # The driver is no task, so waiting here cannot deadlock a worker; the per-result timeout
            # is what is left of the run's, so the run ends on time whatever the chords do.
            try:
                summaries.append(result.get(timeout=max(ctx.remaining(), 0.1), interval=0.2))
            except CeleryTimeout:
                raise DriveTimeout(
                    f"run_timeout of {ctx.spec.run_timeout_s:g}s passed while waiting for "
                    f"chord {c} ({len(summaries)} of {len(results)} chords done)"
                ) from None
        ctx.metric(
            M.CHORDS_MAKESPAN_S,
            max(s["last_finished_at"] for s in summaries) - min(s["first_started_at"] for s in summaries),
            "s",
        )
        ctx.metric(M.HEADER_TASKS, sum(s["count"] for s in summaries), "tasks")
        ctx.metric(M.SERVICE_SLEPT_S, sum(s["slept_s"] for s in summaries), "s")
        stats = call("/stats", timeout=10)
        ctx.metric(M.SERVICE_REQUESTS, stats["requests"], "requests")
        ctx.metric(M.SERVICE_DISTINCT_IDS, stats["distinct_ids"], "requests")
        if stats["requests"] != sum(params.chords):
            ctx.notes.append(
                f"the service answered {stats['requests']} requests for {sum(params.chords)} header "
                "tasks (a task ran twice, or a call failed)"
            )

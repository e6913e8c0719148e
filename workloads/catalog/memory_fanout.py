"""``memory_fanout``: one task fans out units that each hold real data (reference/memory-fanout-gevent-vs-threads.md).

The task ``cmx.memory_fanout.fanout`` runs ``subtasks`` units inside itself, ``sequential``ly, on a
thread pool, or on a gevent pool of ``inner_workers``. Each unit allocates ``size_mb`` of data and
touches every page of it (so it is resident, not just reserved), holds it for ``work_s`` seconds
(``time.sleep``: cooperative in a gevent-patched worker), and returns a small digest.

The study's question is the worker's memory: the sampler gives it over time (``samples``) and as
peaks (``peak_rss_bytes``, ``peak_pss_bytes``, ``worker_vmhwm_max_bytes``); the task's own
execution time is ``makespan_s`` (one task: its finish minus its start), so the driver adds nothing.
"""

from __future__ import annotations

import time
import zlib
from typing import Literal

from pydantic import Field

from cmx.workloads.catalog.base import Workload, WorkloadParams
from cmx.workloads.vocab import pools
from cmx.workloads.vocab import metrics as M

PAGE = 4096


class MemoryFanoutParams(WorkloadParams):
    subtasks: int = Field(10, ge=1, description="units the one task runs inside itself")
    size_mb: float = Field(20.0, gt=0, description="data each unit allocates and holds, in MiB")
    work_s: float = Field(0.5, ge=0, description="seconds each unit holds its data (time.sleep)")
    inner: Literal["sequential", pools.THREADS, pools.GEVENT] = Field(  # type: ignore[valid-type]
        "sequential", description="how the task runs its units: a loop, a ThreadPoolExecutor, a gevent Pool"
    )
    inner_workers: int = Field(4, ge=1, description="threads or greenlets of the inner pool")


def unit(index: int, size_bytes: int, work_s: float) -> tuple[int, int]:
    """Allocate ``size_bytes``, make every page resident, hold it ``work_s`` s; a small digest back."""
    data = bytearray(size_bytes)  # calloc'd: untouched pages would cost no memory
    pages = len(range(0, size_bytes, PAGE))
    data[::PAGE] = bytes([index % 255 + 1]) * pages
    time.sleep(work_s)
    return index, zlib.crc32(data[::PAGE])


def run_units(params: MemoryFanoutParams) -> list[tuple[int, int]]:
    size = int(params.size_mb * 1024 * 1024)
    args = range(params.subtasks)
    if params.inner == "sequential":
        return [unit(i, size, params.work_s) for i in args]
    if params.inner == pools.THREADS:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=params.inner_workers) as pool:
            return list(pool.map(lambda i: unit(i, size, params.work_s), args))
    # gevent only here: importing it elsewhere would drag it into workers that never use it
    import gevent.pool

    pool = gevent.pool.Pool(params.inner_workers)
    return list(pool.imap(lambda i: unit(i, size, params.work_s), args))


class MemoryFanout(Workload):
    name = "memory_fanout"
    Params = MemoryFanoutParams
    smoke_params = {"subtasks": 2, "size_mb": 1.0, "work_s": 0.1}
    objective = M.PEAK_PSS_BYTES
    headline_metrics = (M.MAKESPAN_S, M.PEAK_PSS_BYTES, M.PEAK_RSS_BYTES, M.WORKER_VMHWM_MAX_BYTES)

    def register_tasks(self, app):
        @app.task(name="cmx.memory_fanout.fanout", shared=False)
        def fanout(params: dict) -> int:
            digests = run_units(MemoryFanoutParams.model_validate(params))
            return len(digests)

    def drive(self, ctx, params: MemoryFanoutParams):
        fanout = ctx.app.tasks["cmx.memory_fanout.fanout"]
        ctx.wait_for_workers()
        fanout.apply_async((params.model_dump(),))
        ctx.start_consuming()
        ctx.wait_completed(1)

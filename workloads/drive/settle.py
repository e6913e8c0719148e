"""The end of a fault run (``fault`` not none): when every published task is finished, failed or
given up. Tasks a fault lost never finish and a redelivered one may finish twice, so no count of
completions says the run is over; instead it ends once every fault of the run is over (its
``fault_end`` event arrived: a replacement worker is ready) and ``limits.settle`` seconds passed
without a task finishing. Ingest counts the tasks that never finished as lost.

Progress is the workers' own count of finished tasks (``cmx_progress``), per worker process: a
replacement worker of the same node counts from 0 again, so each process's count is kept apart.
"""

from __future__ import annotations

import time

from cmx.workloads.drive import connection_errors
from cmx.workloads.runtime.workerevents import FAULT_END


def wait_settled(ctx, poll_s: float = 0.2) -> None:
    """Block until the run's faults are over and ``ctx.spec.settle_s`` passed without progress (or
    the run times out: DriveTimeout; a worker lost otherwise: WorkerProblem, from the watchdog)."""
    spec = ctx.spec
    nodes = list(spec.worker_nodes)
    strikes = sum(f.strikes(len(nodes)) for f in spec.faults)
    finished: dict[tuple[str, object], int] = {}  # (node, pid) -> tasks it finished
    total, last = -1, time.monotonic()
    settling = False  # the faults are over: from then on, settle_s without progress ends the run
    conn = None
    try:
        while True:
            if conn is None:
                conn = ctx.app.connection_for_read()
            depth = ctx.queue_depth(conn)
            if depth is not None:
                ctx.queue_samples.append((time.time(), depth))
            else:  # a broken connection (a restarted broker): a new one next time
                _release(conn)
                conn = None
            try:
                replies = (
                    ctx.app.control.broadcast(
                        "cmx_progress", destination=nodes, reply=True, timeout=1.0, limit=len(nodes)
                    )
                    or []
                )
            except Exception:  # the broker is away: no word of progress this round
                replies = []
            for reply in replies:
                for node, r in reply.items():
                    if isinstance(r, dict):
                        key = (node, r.get("pid"))
                        finished[key] = max(finished.get(key, 0), int(r.get("completed", 0)))
            now = time.monotonic()
            if sum(finished.values()) != total:
                total, last = sum(finished.values()), now
            over = {(e.host, e.index) for e in ctx.worker_events() if e.kind == FAULT_END}
            if len(over) < strikes:  # a fault on every worker host (:all) is over once each host's is
                last = now  # settling starts once the last fault is over…
            elif not settling:
                # …from the round that first saw it over, not the one before: a round lasts up to
                # the progress poll's 1 s wait, which ate into a 3 s settle and ended a run while the
                # replacement worker ran its first 2 s tasks (test_term_worker_waits_for_running_tasks…).
                settling, last = True, now
            elif now - last >= spec.settle_s:
                return
            ctx.check_deadline(f"waiting for the run's tasks to settle after its faults ({total} finished so far)")
            time.sleep(poll_s)
    finally:
        if conn is not None:
            _release(conn)


def _release(conn) -> None:
    """Give a connection back; one the broker already closed may raise on the way: it is gone
    either way."""
    try:
        conn.release()
    except connection_errors():
        pass

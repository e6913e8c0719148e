"""Ingest of what the run's workers did and ran with: completed tasks per worker host (and the
metric ``host_share_min``), each worker's reported configuration, and why a worker ended.

A task-level setting is reported once per task of the run, under the key
``task.<task name>.<setting>`` (workloads/runtime/effective.py ``task_key``), in the same table: no new
column, so databases and queries of today's ``worker_config`` read on unchanged.

Apart from :mod:`cmx.engine.results.ingest` because it needs the run's worker hosts, which only the runner
knows (a host of the ``workers`` group may be a broker host that ran no worker in this run).
"""

from __future__ import annotations

import json
from pathlib import Path

from cmx.engine.results.dbconnect import sql
from cmx.engine.results.metricdefs import unit_of
from cmx.workloads.host.supervisor import exit_text
from cmx.workloads.vocab import metrics as M


def ingest_workers(con, run_id: str, art_dir: Path, workers: tuple[str, ...], driver_host: str) -> dict[str, float]:
    """Store host_tasks and worker_config rows of one run; returns its metrics (also stored)."""
    con.execute("BEGIN")
    try:
        con.execute(sql("host_tasks.sql"), {"run_id": run_id, "workers": list(workers)})
        configs = _read_json(art_dir / driver_host / "worker_config.json")
        for node, config in sorted(configs.items()):
            host = node.split("@", 1)[-1]
            con.executemany(
                "INSERT INTO worker_config VALUES (?, ?, ?, ?, ?)",
                [[run_id, host, node, key, json.dumps(value)] for key, value in sorted(config.items())],
            )
        metrics: dict[str, float] = {}
        if len(set(workers)) > 1:
            (share,) = con.execute("SELECT min(share) FROM host_tasks WHERE run_id = ?", [run_id]).fetchone()
            if share is not None:
                metrics[M.HOST_SHARE_MIN] = share
        for name, value in metrics.items():
            con.execute("INSERT INTO metrics VALUES (?, ?, ?, ?)", [run_id, name, value, unit_of(name)])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return metrics


def worker_causes(art_dir: Path, hosts: list[str], noticed_at: float | None) -> str:
    """Why the workers on ``hosts`` stopped answering, from the worker.exit their supervisors
    wrote, e.g. "worker on h3 exited, signal 9 (SIGKILL)". A worker that ended only after
    the driver gave up on it (``noticed_at``) was alive but silent: the run's stop ended it."""
    parts = []
    for host in dict.fromkeys(hosts):
        how = exit_text(art_dir / host)
        ended = _read_json(art_dir / host / "worker.exit").get("at")
        if how is None:
            how = "left no exit record (its host down or unreachable?)"
        elif noticed_at is not None and ended is not None and ended > noticed_at + 1.0:
            how = "was still running but not answering (hung?) until the run's stop ended it"
        parts.append(f"worker on {host} {how}")
    return "; ".join(parts)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}

"""Ingest: the artifacts fetched back from the hosts of one run become rows in the results database.

Layout read (``results/artifacts/<run_id>/``): one folder per host holding the files the host-side
code wrote (``pub-PID.csv``, ``recv-PID.csv``, ``exec-PID.csv``, ``samples.csv``, ``peaks.csv``,
``connections.csv``, ``server_memory.csv``, ``sampler.json``, ``noise.json``, ``facts.json``, ``worker.json``,
``driver.json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from cmx.engine.results.dbconnect import sql
from cmx.engine.results.ingest_noise import ingest_noise
from cmx.engine.results.metricdefs import over_drivers, unit_of
from cmx.workloads.vocab import metrics as M

CSV_COLUMNS = {
    "pub": {
        "task_id": "VARCHAR",
        "name": "VARCHAR",
        "host": "VARCHAR",
        "pid": "INTEGER",
        "intended_at": "DOUBLE",
        "sent_at": "DOUBLE",
    },
    "recv": {"task_id": "VARCHAR", "host": "VARCHAR", "pid": "INTEGER", "received_at": "DOUBLE"},
    "exec": {
        "task_id": "VARCHAR",
        "name": "VARCHAR",
        "host": "VARCHAR",
        "pid": "INTEGER",
        "sent_at": "DOUBLE",
        "started_at": "DOUBLE",
        "finished_at": "DOUBLE",
        "state": "VARCHAR",
        "redelivered": "INTEGER",
    },
    "samples": {
        "host": "VARCHAR",
        "pid": "INTEGER",
        "role": "VARCHAR",
        "ts": "DOUBLE",
        "rss_bytes": "BIGINT",
        "pss_bytes": "BIGINT",
        "cpu_percent": "DOUBLE",
    },
    "peaks": {"host": "VARCHAR", "pid": "INTEGER", "role": "VARCHAR", "name": "VARCHAR", "vmhwm_bytes": "BIGINT"},
    "connections": {
        "host": "VARCHAR",
        "role": "VARCHAR",
        "kind": "VARCHAR",
        "ts": "DOUBLE",
        "count": "INTEGER",
        "client": "VARCHAR",
    },
    "server_memory": {
        "host": "VARCHAR",
        "role": "VARCHAR",
        "kind": "VARCHAR",
        "ts": "DOUBLE",
        "node": "VARCHAR",
        "used_bytes": "BIGINT",
    },
    "queue": {"ts": "DOUBLE", "depth": "BIGINT"},
    "sample_marks": {"host": "VARCHAR", "name": "VARCHAR", "ts": "DOUBLE"},
    "broker_lost": {"host": "VARCHAR", "pid": "INTEGER", "ts": "DOUBLE"},
    "faults": {
        "idx": "INTEGER",
        "fault": "VARCHAR",
        "kind": "VARCHAR",
        "host": "VARCHAR",
        "pid": "INTEGER",
        "task_id": "VARCHAR",
        "struck_at": "DOUBLE",
        "ended_at": "DOUBLE",
        "error": "VARCHAR",
        "method": "VARCHAR",
    },
}


@dataclass(frozen=True)
class HostInfo:
    """What the controller knows of a host of the run, beside what the host reported itself."""

    groups: tuple[str, ...]
    #: Whether all of the host's records reached the controller (its pack fetched and unpacked).
    collected: bool = True


@dataclass
class Ingested:
    driver: dict = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _header(path: Path) -> tuple[str, ...]:
    with open(path) as f:
        return tuple(f.readline().strip().split(","))


def _stage(con, kind: str, files: list[Path]) -> None:
    """Temp table ``stage_<kind>`` with the rows of ``files`` (CSV, typed), empty when there are none.
    Files written before a column was added (artifacts of older versions) leave it NULL."""
    cols = CSV_COLUMNS[kind]
    con.execute(f"DROP TABLE IF EXISTS temp.stage_{kind}")
    con.execute(f"CREATE TEMP TABLE stage_{kind} ({', '.join(f'{k} {v}' for k, v in cols.items())})")
    by_header: dict[tuple[str, ...], list[str]] = {}
    for f in files:
        by_header.setdefault(_header(f), []).append(str(f))
    for header, paths in by_header.items():
        present = {k: v for k, v in cols.items() if k in header}
        if tuple(present) != header:  # unknown, missing-in-the-middle or reordered: read as the header says
            present = {k: cols.get(k, "VARCHAR") for k in header}
        spec = "{" + ", ".join(f"'{k}': '{v}'" for k, v in present.items()) + "}"
        names = ", ".join(k for k in present if k in cols)
        con.execute(
            f"INSERT INTO stage_{kind} ({names}) SELECT {names} FROM read_csv(?, header = true, columns = {spec})",
            [paths],
        )


def ingest_run(
    con, run_id: str, art_dir: Path, warmup_s: float, hosts: dict[str, HostInfo], drivers: tuple[str, ...] = ()
) -> Ingested:
    """Insert everything of one run into the database and compute its metrics (one transaction).
    ``drivers``: the run's driver hosts, the leading one first (its driver.json is the run's)."""
    host_dirs = [art_dir / h for h in sorted(hosts) if (art_dir / h).is_dir()]
    # A host whose records did not all arrive (it dropped off, its pack was cut) may have run what
    # looks unrun: such tasks are UNSEEN, not LOST.
    every = len(host_dirs) == len(hosts) and all(h.collected for h in hosts.values())
    unrun = "LOST" if every else "UNSEEN"
    out = Ingested()
    con.execute("BEGIN")
    try:
        for kind in ("pub", "recv", "exec"):
            _stage(con, kind, [f for d in host_dirs for f in sorted(d.glob(f"{kind}-*.csv"))])
        con.execute(sql("ingest_tasks.sql"), {"run_id": run_id, "unrun": unrun})
        for table in ("samples", "peaks", "connections", "server_memory", "sample_marks", "broker_lost"):
            _stage(con, table, [d / f"{table}.csv" for d in host_dirs if (d / f"{table}.csv").exists()])
            con.execute(f"INSERT INTO main.{table} SELECT ? AS run_id, * FROM temp.stage_{table}", [run_id])
        for d in host_dirs:  # each sample with the driver host that took it: its clock moves it
            if (d / "queue.csv").exists():
                _stage(con, "queue", [d / "queue.csv"])
                con.execute(
                    "INSERT INTO main.queue_depth (run_id, ts, depth, host) "
                    "SELECT ?, ts, depth, ? FROM temp.stage_queue",
                    [run_id, d.name],
                )
        out.driver = _drivers_json(art_dir, drivers, host_dirs)
        clock_host = drivers[0] if drivers else next((d.name for d in host_dirs if (d / "driver.json").exists()), None)
        # A fault run's faults, one row per host struck, each with the workload's clock start and the
        # drive's end (the leading driver's, on its host's clock).
        _stage(con, "faults", [d / "faults.csv" for d in host_dirs if (d / "faults.csv").exists()])
        cols = ", ".join(CSV_COLUMNS["faults"])
        con.execute(
            f"INSERT INTO main.faults (run_id, {cols}, clock_at, clock_host, drive_end_at) "
            f"SELECT ? AS run_id, {cols}, ? AS clock_at, ? AS clock_host, ? AS drive_end_at "
            "FROM temp.stage_faults",
            [run_id, out.driver.get("consuming_at"), clock_host, out.driver.get("drive_ended_at")],
        )
        _insert_hosts(con, run_id, host_dirs, hosts, out.driver)
        _insert_packages(con, run_id, host_dirs)
        _insert_broker_queues(con, run_id, host_dirs)
        rows = [
            (name, value, None)
            for name, value in con.execute(sql("metrics.sql"), {"run_id": run_id, "warmup_s": warmup_s}).fetchall()
        ]
        own = _driver_metrics(art_dir, drivers)
        extra = [(name, value, unit) for name, value, unit in out.driver.get("metrics", [])]
        extra = [(name, _over_drivers(name, value, own, drivers), unit) for name, value, unit in extra]
        extra += _sampler_cpu(host_dirs) + _heartbeat(host_dirs) + ingest_noise(con, run_id, host_dirs)
        if len(drivers) > 1:
            rates = dict(con.execute(sql("driver_rates.sql"), {"run_id": run_id, "warmup_s": warmup_s}).fetchall())
            extra.append((M.PUBLISH_RATE_MIN_DRIVER, min(rates.get(h) or 0.0 for h in drivers), "tasks/s"))
            own += [(h, M.PUBLISH_RATE, rates.get(h), "tasks/s") for h in drivers]
        if own:
            con.executemany(
                "INSERT INTO driver_metrics VALUES (?, ?, ?, ?, ?)",
                [(run_id, h, name, value, unit_of(name, unit)) for h, name, value, unit in own],
            )
        for name, value, reported in [*rows, *extra]:
            out.metrics[name] = value
            con.execute("INSERT INTO metrics VALUES (?, ?, ?, ?)", [run_id, name, value, unit_of(name, reported)])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return out


def not_run(con, run_id: str, lost_before_queue: int = 0) -> dict[str, float | None]:
    """A run that did not end ok (interrupted, failed, timed out) stopped before the tasks it never
    executed: they are ``tasks_not_run``, not lost (a lost task is one a finished run never saw
    run: the broker's doing), and ``tasks_lost`` is unknown (NULL) when there are any. Called once
    its status is known, before its end is stored; the metrics it changes, as ingest returns them.
    A run failed because its driver found ``lost_before_queue`` tasks gone before the queue
    (workloads/drive/lost.py) stopped before none of them: when they are exactly the tasks it
    never executed, they stay ``tasks_lost`` (and ``tasks_not_run`` is 0)."""
    row = con.execute("SELECT value FROM metrics WHERE run_id = ? AND name = ?", [run_id, M.TASKS_LOST]).fetchone()
    if row is None or row[0] is None:  # not ingested, or a host's records missing (tasks_unseen says it)
        return {}
    unrun = row[0]
    if lost_before_queue and unrun == lost_before_queue:  # the broker's doing: lost, every one
        con.execute(
            "INSERT INTO metrics VALUES (?, ?, ?, ?)", [run_id, M.TASKS_NOT_RUN, 0.0, unit_of(M.TASKS_NOT_RUN, None)]
        )
        return {M.TASKS_NOT_RUN: 0.0}
    if unrun:
        con.execute("UPDATE metrics SET value = NULL WHERE run_id = ? AND name = ?", [run_id, M.TASKS_LOST])
    con.execute(
        "INSERT INTO metrics VALUES (?, ?, ?, ?)", [run_id, M.TASKS_NOT_RUN, unrun, unit_of(M.TASKS_NOT_RUN, None)]
    )
    return {M.TASKS_LOST: None if unrun else 0.0, M.TASKS_NOT_RUN: unrun}


def _drivers_json(art_dir: Path, drivers: tuple[str, ...], host_dirs: list[Path]) -> dict:
    """The run's driver.json: the leading driver's, failed with the first other driver's error
    when another driver failed or left none (each publishes a share: the run lacks it)."""
    if not drivers:  # the one driver host's, as found
        return next((_read_json(d / "driver.json") for d in host_dirs if (d / "driver.json").exists()), {})
    lead = _read_json(art_dir / drivers[0] / "driver.json")
    for host in drivers[1:]:
        other = _read_json(art_dir / host / "driver.json")
        if lead.get("status", "ok") == "ok" and other.get("status") != "ok":
            lead |= {
                "status": other.get("status") or "failed",
                "error": f"the driver on {host}: {other.get('error') or 'left no driver.json'}",
            }
    return lead


def _driver_metrics(art_dir: Path, drivers: tuple[str, ...]) -> list[tuple[str, str, float, str]]:
    """(host, name, value, unit) of what each driver host of a run of several drivers reported of
    itself in its driver.json (one driver: the run's own metrics say it all)."""
    if len(drivers) < 2:
        return []
    return [
        (h, name, value, unit)
        for h in drivers
        for name, value, unit in _read_json(art_dir / h / "driver.json").get("metrics", [])
    ]


def _over_drivers(
    name: str, value: float | None, own: list[tuple[str, str, float, str]], drivers: tuple[str, ...]
) -> float | None:
    """The run's value of a metric each driver reports of its own share: the sum over the drivers
    for a count (metricdefs ``over_drivers``), else the leading driver's as reported. A sum is
    unknown (None) unless every driver reported its part: a partial sum would pass for the whole."""
    if not own or over_drivers(name) != "sum":
        return value
    parts = {h: v for h, n, v, _ in own if n == name and v is not None}
    return sum(parts.values()) if set(drivers) <= set(parts) else None


def _heartbeat(host_dirs: list[Path]) -> list[tuple[str, float, str]]:
    """The broker heartbeat the workers' connections negotiated (lowest over workers)."""
    beats = [
        w[M.HEARTBEAT_NEGOTIATED_S]
        for d in host_dirs
        if (w := _read_json(d / "worker.json")).get(M.HEARTBEAT_NEGOTIATED_S) is not None
    ]
    return [(M.HEARTBEAT_NEGOTIATED_S, float(min(beats)), "s")] if beats else []


def _sampler_cpu(host_dirs: list[Path]) -> list[tuple[str, float, str]]:
    """The samplers' own CPU, in % of one core (max over hosts): the cost of measuring."""
    worst = None
    for d in host_dirs:
        s = _read_json(d / "sampler.json")
        if s.get("wall_seconds"):
            pct = 100.0 * s.get("cpu_seconds", 0.0) / s["wall_seconds"]
            worst = pct if worst is None else max(worst, pct)
    return [] if worst is None else [(M.SAMPLER_CPU_PERCENT, worst, "%")]


def _insert_hosts(con, run_id: str, host_dirs: list[Path], hosts: dict[str, HostInfo], driver: dict) -> None:
    for d in host_dirs:
        f = _read_json(d / "facts.json")
        info = hosts.get(d.name, HostInfo(groups=()))
        con.execute(
            """INSERT INTO hosts (run_id, host, groups, cpu_model, cores, memory_bytes, kernel, python, celery,
                                          kombu, broker_version, clock_offset_s, clock_uncertainty_s, hostname,
                                          governor, backend_version)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [
                run_id,
                d.name,
                ",".join(info.groups),
                f.get("cpu_model"),
                f.get("cores"),
                f.get("memory_bytes"),
                f.get("kernel"),
                f.get("python"),
                f.get("celery"),
                f.get("kombu"),
                driver.get("broker_version"),
                f.get("clock_offset_s"),
                f.get("clock_uncertainty_s"),
                f.get("hostname"),
                f.get("governor"),
                driver.get("backend_version"),
            ],
        )


def _insert_broker_queues(con, run_id: str, host_dirs: list[Path]) -> None:
    """The type the broker itself gave the run's queues, as each driver read it back (driver.json)."""
    rows = [
        (run_id, d.name, q.get("queue"), q.get("type"), q.get("source"))
        for d in host_dirs
        for q in (_read_json(d / "driver.json").get("queues") or [])
    ]
    if rows:
        con.executemany("INSERT INTO broker_queues VALUES (?, ?, ?, ?, ?)", rows)


def _insert_packages(con, run_id: str, host_dirs: list[Path]) -> None:
    """The versions each worker and driver process reported of itself (worker.json, driver.json)."""
    rows = [
        (run_id, d.name, role, name, version)
        for d in host_dirs
        for role in ("worker", "driver")
        for name, version in (_read_json(d / f"{role}.json").get("packages") or {}).items()
    ]
    if rows:
        con.executemany("INSERT INTO packages VALUES (?, ?, ?, ?, ?)", rows)

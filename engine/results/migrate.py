"""Results that survive upgrades: each table's version in ``cmx_schema``, and the steps that bring
an older database up to this cmx's.

A user's database holds months of results, so a database written by an earlier release must open
in this one, its rows kept as they are. ``sql/schema.sql`` is the schema as cmx 0.1.0 wrote it
(the baseline, idempotent: ``CREATE TABLE IF NOT EXISTS``, ``ADD COLUMN IF NOT EXISTS``); every
later change is one :class:`Step` appended to :data:`STEPS`. A new database and an old one take the
same path: the baseline, then each step whose ``from_version`` is the table's version, in order.
Steps only add (columns, tables, views): rows are never rewritten or deleted.

When: on every writable open (``db.connect``). A read-only open (``cmx status``, ``report``,
``compare``, ``sql``) of an older database opens it writable once to upgrade it, then reads: the
views read the new columns, and a second reader finds it current. A database that a newer cmx
wrote (a table at a version this cmx does not know) is refused before anything writes to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import duckdb

from cmx.engine.errors import InputError, Problem
from cmx.engine.results import headlines

SCHEMA_SQL = Path(__file__).with_name("sql") / "schema.sql"


@dataclass(frozen=True)
class Step:
    """``sql`` takes ``table`` from ``from_version`` to ``to_version`` (``from_version`` 0: the
    table is new). It must only add: ``ALTER TABLE … ADD COLUMN``, ``CREATE TABLE``."""

    table: str
    from_version: int
    to_version: int
    sql: str


#: Applied in this order after ``schema.sql``. Adding a migration is one entry here, e.g.
#: ``Step("tasks", 1, 2, "ALTER TABLE tasks ADD COLUMN retries INTEGER")`` (rows stored before
#: read NULL in it). tests/integration/test_upgrade.py opens the 0.1.0 fixture with every step.
STEPS: tuple[Step, ...] = (
    # 0.2.0. Each finished sweep is one point of history (issue 26): `planned` = the runs this
    # invocation meant to execute; `resumes` = the sweep id of the interrupted sweep it continues
    # (NULL when it starts a point of its own). A sweep is finished when each planned run has an
    # end that is ok, failed or timeout; `cmx run` resumes only an unfinished one (db.resume_point).
    Step(
        "sweeps",
        2,
        3,
        "ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS planned INTEGER; "
        "ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS resumes VARCHAR",
    ),
    # Thresholds (`thresholds:`) checked per cell when a sweep ends, on the median of the cell's ok
    # runs of that sweep's point (median NULL: no ok run has the metric, so it is not held).
    Step(
        "threshold_checks",
        0,
        1,
        "CREATE TABLE IF NOT EXISTS threshold_checks (sweep_id VARCHAR, "
        "cell_id VARCHAR, metric VARCHAR, op VARCHAR, value DOUBLE, median DOUBLE, "
        "n INTEGER, held BOOLEAN)",
    ),
    # When each host's sampler read PSS of every watched process for a mark of the run (that host's
    # clock, as samples.ts): 'clock' as the workload's clock started, 'drain' once its work drained
    # (workloads/runtime/runmarks.py). Peak PSS metrics read only samples between a host's two marks.
    Step(
        "sample_marks",
        0,
        1,
        "CREATE TABLE IF NOT EXISTS sample_marks (run_id VARCHAR, host VARCHAR, name VARCHAR, ts DOUBLE)",
    ),
    # The environment fingerprint (cmx.analysis.fingerprint): the hosts' CPU frequency governor and
    # the result backend's server version, and the package versions each worker and driver ran with.
    Step(
        "hosts",
        1,
        2,
        "ALTER TABLE hosts ADD COLUMN IF NOT EXISTS governor VARCHAR; "
        "ALTER TABLE hosts ADD COLUMN IF NOT EXISTS backend_version VARCHAR",
    ),
    Step(
        "packages",
        0,
        1,
        "CREATE TABLE IF NOT EXISTS packages "
        "(run_id VARCHAR, host VARCHAR, role VARCHAR, name VARCHAR, version VARCHAR)",
    ),
    # The faults a run injected (the `fault` dimension: workloads/host/faultinject.py), each as its
    # host recorded it: when it struck and ended (that host's clock), the process and the task it
    # hit, why it failed; and the workload's clock start (`clock_at`, on `clock_host`'s clock).
    # Read through the view fault_times (task_times.sql), which puts them on the controller's clock.
    Step(
        "faults",
        0,
        1,
        "CREATE TABLE IF NOT EXISTS faults (run_id VARCHAR, idx INTEGER, fault VARCHAR, "
        "kind VARCHAR, host VARCHAR, pid INTEGER, task_id VARCHAR, struck_at DOUBLE, ended_at DOUBLE, "
        "error VARCHAR, clock_at DOUBLE, clock_host VARCHAR)",
    ),
    # Several drivers (issue 29): each queue-depth sample names the driver host that took it, so
    # queue_depth_times moves it by that host's clock offset (NULL in rows stored before: the
    # view falls back on the run's publisher, as it did).
    Step("queue_depth", 1, 2, "ALTER TABLE queue_depth ADD COLUMN IF NOT EXISTS host VARCHAR"),
    # What each driver host reported of itself (its driver.json's metrics: publish_behind…), and
    # its publish rate, per run and host; `metrics` holds the run's whole (metricdefs.over_drivers).
    Step(
        "driver_metrics",
        0,
        1,
        "CREATE TABLE IF NOT EXISTS driver_metrics (run_id VARCHAR, host VARCHAR, "
        "name VARCHAR, value DOUBLE, unit VARCHAR)",
    ),
    # A fault run's end (issue 39): when its leading driver stopped waiting (its faults over and
    # limits.settle without a completion, or the run's timeout), on `clock_host`'s clock as
    # `clock_at`; the stall_s of a run whose tasks never all finished runs to it (metrics.sql).
    Step("faults", 1, 2, "ALTER TABLE faults ADD COLUMN IF NOT EXISTS drive_end_at DOUBLE"),
    # The noise group per run and host (engine/results/ingest_noise.py): the host's load from outside
    # the run; `metrics` holds the worst host's value of each.
    Step(
        "host_noise",
        0,
        1,
        "CREATE TABLE IF NOT EXISTS host_noise (run_id VARCHAR, host VARCHAR, "
        "name VARCHAR, value DOUBLE, unit VARCHAR)",
    ),
    # How a partition_worker cut the worker host off (issue 39): `nftables`, `iptables` (packets
    # dropped silently) or `route` (a blackhole route, where no packet filter exists: sends fail at
    # once); NULL for other kinds and in rows stored before.
    Step("faults", 2, 3, "ALTER TABLE faults ADD COLUMN IF NOT EXISTS method VARCHAR"),
    # Each time a worker of a fault run noticed its broker connection broken (its consumer's
    # "Connection to broker lost": workloads/runtime/instrument.py, broker_lost.csv), on its host's clock;
    # read through broker_lost_times (task_times.sql); the first after the fault is detect_s.
    Step(
        "broker_lost",
        0,
        1,
        "CREATE TABLE IF NOT EXISTS broker_lost (run_id VARCHAR, host VARCHAR, pid INTEGER, ts DOUBLE)",
    ),
    # A racing sweep (repeats: {min, max}) that ended before running every run it planned: decided,
    # at its max or at a budget (`how`, cli/race.py). Such a sweep is finished, not resumable.
    Step(
        "sweep_ends",
        0,
        1,
        "CREATE TABLE IF NOT EXISTS sweep_ends (sweep_id VARCHAR, ended_at TIMESTAMPTZ, how VARCHAR)",
    ),
    # What each run's workload calls its headline (issue 41: analysis reads it here, never a workload
    # class): engine/results/headlines.py. Runs of built-in workloads stored before are filled in
    # when this step is applied (:data:`AFTER`).
    Step("run_headlines", 0, 1, f"CREATE TABLE IF NOT EXISTS run_headlines {headlines.COLUMNS}"),
    # What type the broker itself gave the run's queue (issue 42: RabbitMQ's classic or quorum), as the
    # driver read it back (the management API, else AMQP): a run whose queue is not what its cell
    # asks fails saying so; this is what ran.
    Step(
        "broker_queues",
        0,
        1,
        "CREATE TABLE IF NOT EXISTS broker_queues (run_id VARCHAR, host VARCHAR, "
        "queue VARCHAR, type VARCHAR, source VARCHAR)",
    ),
    # The memory the broker or backend said it used (issue 42: a cluster's nodes are several
    # processes, on several hosts), by its own accounting, per node that answered each probe tick
    # of the sampler (server_memory.csv: RabbitMQ's /api/nodes mem_used, Redis INFO used_memory);
    # the host that asked, on its clock. No rows where the server cannot say: its metrics are NULL.
    Step(
        "server_memory",
        0,
        1,
        "CREATE TABLE IF NOT EXISTS server_memory (run_id VARCHAR, host VARCHAR, "
        "role VARCHAR, kind VARCHAR, ts DOUBLE, node VARCHAR, used_bytes BIGINT)",
    ),
)
#: What is computed, not declared, once a step has been applied: (table, to_version) -> fill(con).
AFTER = {("run_headlines", 1): headlines.backfill}


def versions(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """``{table: version}`` as ``cmx_schema`` of ``con`` says ({} when it has none)."""
    if not con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'cmx_schema' AND NOT temporary").fetchone():
        return {}
    return dict(con.execute("SELECT table_name, version FROM cmx_schema").fetchall())


@lru_cache(maxsize=1)
def current() -> dict[str, int]:
    """The version of each table this cmx writes: those of a new database (baseline, then steps)."""
    con = duckdb.connect(":memory:")
    try:
        upgrade(con)
        return versions(con)
    finally:
        con.close()


def newer(found: dict[str, int], known: dict[str, int] | None = None) -> tuple[str, int, int] | None:
    """(table, its version in the file, the version this cmx knows; 0: unknown table) of the first
    table a newer cmx wrote, or None."""
    known = current() if known is None else known
    for table, version in sorted(found.items()):
        if version > known.get(table, 0):
            return table, version, known.get(table, 0)
    return None


def newer_reason(found: dict[str, int]) -> str | None:
    """What a newer cmx wrote, in words ("table T at version V; this cmx knows …"), or None."""
    hit = newer(found)
    if not hit:
        return None
    table, version, known = hit
    return f"table {table} at version {version}; this cmx knows {f'version {known}' if known else 'no such table'}"


def refuse_newer(found: dict[str, int], path: Path | str) -> None:
    """InputError (exit 2) for a database written by a newer cmx; nothing is written to it."""
    reason = newer_reason(found)
    if reason:
        raise InputError(
            Problem(
                f"written by a newer cmx ({reason}): open it with that cmx or a later one; left untouched", str(path)
            )
        )


def pending(found: dict[str, int]) -> bool:
    """True when the database lacks a table or a step of this cmx (an upgrade would change it)."""
    return any(found.get(table, 0) < version for table, version in current().items())


def upgrade(con: duckdb.DuckDBPyConnection) -> None:
    """The baseline, then every step the database has not had, in one transaction (all or none)."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(SCHEMA_SQL.read_text())
        have = versions(con)
        for step in STEPS:
            if have.get(step.table, 0) != step.from_version:
                continue  # had it already (a later version), or steps out of order: test_migrate checks
            con.execute(step.sql)
            if (step.table, step.to_version) in AFTER:
                AFTER[step.table, step.to_version](con)
            con.execute("INSERT OR REPLACE INTO cmx_schema VALUES (?, ?)", [step.table, step.to_version])
            have[step.table] = step.to_version
        con.execute("COMMIT")
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass  # the failure was the commit itself: nothing left to undo
        raise

-- celery-matrix results database: the schema as cmx 0.1.0 wrote it (the baseline). A later change is a
-- step in engine/results/migrate.py (STEPS), applied after this file; each table's version is in
-- cmx_schema, which only ever goes up (a version here never lowers one a step has raised).
-- Append-only: rows are inserted, never updated or deleted. Timestamps of tasks and samples are
-- Unix epoch seconds (DOUBLE) so that latencies are plain subtractions.

CREATE TABLE IF NOT EXISTS cmx_schema (table_name VARCHAR PRIMARY KEY, version INTEGER NOT NULL);

-- One row per sweep invocation: what was asked, with the experiment's full definition.
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id VARCHAR, experiment VARCHAR, source VARCHAR, workload VARCHAR, description VARCHAR,
    inventory VARCHAR, started_at TIMESTAMPTZ, definition JSON
);

-- Written before a run starts (so a crash still leaves a record, as Rally does)...
CREATE TABLE IF NOT EXISTS run_starts (
    experiment VARCHAR, sweep_id VARCHAR, run_id VARCHAR, cell_id VARCHAR, repeat INTEGER,
    workload VARCHAR, dims JSON, params JSON, warmup_s DOUBLE, started_at TIMESTAMPTZ
);
-- ...and this one when it has ended. The view `runs` joins the two.
CREATE TABLE IF NOT EXISTS run_ends (
    run_id VARCHAR, status VARCHAR, error VARCHAR, finished_at TIMESTAMPTZ,
    stage_seconds JSON  -- seconds spent in start / drive / stop / collect / ingest
);

CREATE TABLE IF NOT EXISTS tasks (
    run_id VARCHAR, task_id VARCHAR, name VARCHAR, host VARCHAR, pid INTEGER,
    sent_at DOUBLE, received_at DOUBLE, started_at DOUBLE, finished_at DOUBLE,
    state VARCHAR,           -- Celery's state; LOST when published and never executed
    redelivered BOOLEAN,
    intended_at DOUBLE,      -- when the driver meant to send (stream mode)
    publisher_host VARCHAR
);

CREATE TABLE IF NOT EXISTS samples (
    run_id VARCHAR, host VARCHAR, pid INTEGER,
    role VARCHAR,            -- worker, worker-child, broker, backend, driver, service, sampler
    ts DOUBLE, rss_bytes BIGINT, pss_bytes BIGINT, cpu_percent DOUBLE
);

-- Exact per-process peak resident memory (VmHWM from /proc/PID/status).
CREATE TABLE IF NOT EXISTS peaks (
    run_id VARCHAR, host VARCHAR, pid INTEGER, role VARCHAR, name VARCHAR, vmhwm_bytes BIGINT
);

-- Broker and backend connection counts over the run.
CREATE TABLE IF NOT EXISTS connections (
    run_id VARCHAR, host VARCHAR, role VARCHAR, kind VARCHAR, ts DOUBLE, count INTEGER
);

-- Messages waiting in the run's queue over time (sampled by the driver while tasks run).
CREATE TABLE IF NOT EXISTS queue_depth (run_id VARCHAR, ts DOUBLE, depth BIGINT);

CREATE TABLE IF NOT EXISTS metrics (run_id VARCHAR, name VARCHAR, value DOUBLE, unit VARCHAR);

CREATE TABLE IF NOT EXISTS hosts (
    run_id VARCHAR, host VARCHAR, groups VARCHAR, cpu_model VARCHAR, cores INTEGER, memory_bytes BIGINT,
    kernel VARCHAR, python VARCHAR, celery VARCHAR, kombu VARCHAR, broker_version VARCHAR,
    clock_offset_s DOUBLE,       -- host clock minus controller clock; NULL when unknown
    clock_uncertainty_s DOUBLE,  -- half the round trip of the best of 8 UDP exchanges
    hostname VARCHAR             -- the kernel's name, for information only (hosts are named by inventory)
);

INSERT OR IGNORE INTO cmx_schema VALUES
    ('sweeps', 1), ('run_starts', 1), ('run_ends', 1), ('tasks', 1), ('samples', 1), ('peaks', 1),
    ('connections', 1), ('metrics', 1), ('hosts', 1), ('runs', 1), ('queue_depth', 1);

-- Provenance (schema version 2 of sweeps): which cmx produced a sweep, from which definition and
-- inventory. git_commit/git_dirty are NULL when cmx does not run from a git checkout. The hashes
-- are sha256 hex; the inventory's is taken with its secrets left out, and no secret is stored.
-- revision: runs of one experiment under a changed definition (another definition_hash) are a new
-- revision (`cmx run --new-revision`); NULL in sweeps stored before, read as revision 1.
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS cmx_version VARCHAR;
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS git_commit VARCHAR;
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS git_dirty BOOLEAN;
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS definition_hash VARCHAR;
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS inventory_hash VARCHAR;
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS revision INTEGER;
INSERT INTO cmx_schema VALUES ('sweeps', 2), ('runs', 2)
    ON CONFLICT DO UPDATE SET version = greatest(version, excluded.version);

-- Who runs each sweep (host name, pid and the pid's start time), so that `cmx status` tells a
-- run still under way (its controller alive) from an abandoned one (no end, controller gone).
CREATE TABLE IF NOT EXISTS sweep_controllers (sweep_id VARCHAR, hostname VARCHAR, pid INTEGER, pid_started DOUBLE);
INSERT OR IGNORE INTO cmx_schema VALUES ('sweep_controllers', 1);

-- Completed tasks per worker host of each run (0 for a worker host that did nothing) and the
-- host's share of the run's completed tasks.
CREATE TABLE IF NOT EXISTS host_tasks (run_id VARCHAR, host VARCHAR, tasks_completed BIGINT, share DOUBLE);
-- What each worker really ran with, as it reported it (workloads/runtime/effective.py): pool, concurrency,
-- prefetch_multiplier, prefetch_count, acks_late, heartbeat, and every celery.* setting of the cell.
CREATE TABLE IF NOT EXISTS worker_config (run_id VARCHAR, host VARCHAR, node VARCHAR, key VARCHAR, value JSON);
INSERT OR IGNORE INTO cmx_schema VALUES ('host_tasks', 1), ('worker_config', 1);

-- Run order (#13): each run's position in its sweep's planned order, and the --shuffle seed.
ALTER TABLE run_starts ADD COLUMN IF NOT EXISTS seq INTEGER;
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS shuffle_seed BIGINT;
INSERT INTO cmx_schema VALUES ('run_starts', 2) ON CONFLICT DO UPDATE SET version = greatest(version, excluded.version);

-- connections v2: counts are of the run's own named clients only, one row per client role
-- (worker, driver) per probe; `client` is NULL in rows of older runs (then: every client of the server).
ALTER TABLE connections ADD COLUMN IF NOT EXISTS client VARCHAR;
INSERT INTO cmx_schema VALUES ('connections', 2) ON CONFLICT DO UPDATE SET version = greatest(version, excluded.version);

-- sweeps (also version 2): `cmx run --tag KEY=VALUE` (a JSON object of them) and `--note TEXT`.
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS tags JSON;
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS note VARCHAR;
-- Later changes are steps in engine/results/migrate.py (STEPS), never edits here.


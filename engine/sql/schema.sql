-- celery-matrix results database, schema version 1.
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

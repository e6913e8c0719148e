-- run_summary: one row per run, every column of `runs` (dimensions included) plus the headline
-- metrics as columns, so `SELECT pool, concurrency, consume_rate FROM run_summary` just works.
-- Metrics are append-only; should a run ever carry a metric twice, max() keeps the view one row per run.
CREATE OR REPLACE VIEW run_summary AS
WITH m AS (
    SELECT run_id,
        -- BEGIN metric columns: generated from engine/results/metricdefs.py (RUN_SUMMARY_COLUMNS); python -m cmx.analysis.views
        max(value) FILTER (WHERE name = 'tasks_published') AS tasks_published,
        max(value) FILTER (WHERE name = 'tasks_completed') AS tasks_completed,
        max(value) FILTER (WHERE name = 'tasks_lost') AS tasks_lost,
        max(value) FILTER (WHERE name = 'tasks_duplicated') AS tasks_duplicated,
        max(value) FILTER (WHERE name = 'publish_rate') AS publish_rate,
        max(value) FILTER (WHERE name = 'consume_rate') AS consume_rate,
        max(value) FILTER (WHERE name = 'makespan_s') AS makespan_s,
        max(value) FILTER (WHERE name = 'latency_p50_s') AS latency_p50_s,
        max(value) FILTER (WHERE name = 'latency_p95_s') AS latency_p95_s,
        max(value) FILTER (WHERE name = 'latency_p99_s') AS latency_p99_s,
        max(value) FILTER (WHERE name = 'peak_rss_bytes') AS peak_rss_bytes,
        max(value) FILTER (WHERE name = 'peak_pss_bytes') AS peak_pss_bytes,
        max(value) FILTER (WHERE name = 'broker_connections_max') AS broker_connections_max,
        max(value) FILTER (WHERE name = 'backend_connections_max') AS backend_connections_max
        -- END metric columns
    FROM metrics
    GROUP BY run_id
)
SELECT runs.*, m.* EXCLUDE (run_id)
FROM runs LEFT JOIN m USING (run_id);

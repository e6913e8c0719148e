-- latency_percentiles: per run, the distribution of end-to-end latency of the tasks that ran:
-- finished minus the intended send time (stream mode) or the send time, on the controller's clock
-- (task_times). As in the metrics, tasks sent during the run's warm-up are left out, so
-- p50/p95/p99 here equal the latency_p*_s metrics.
CREATE OR REPLACE VIEW latency_percentiles AS
WITH t AS (
    -- The warm-up counts from the first task sent, lost or not (as metrics.sql does).
    SELECT t.run_id, t.sent_at, t.finished_at - t.origin_at AS latency_s, t.state,
        min(t.sent_at) OVER (PARTITION BY t.run_id) + coalesce(s.warmup_s, 0) AS steady_from
    FROM task_times t JOIN run_starts s USING (run_id)
)
SELECT run_id,
    count(*) AS tasks,
    min(latency_s) AS min_s,
    quantile_cont(latency_s, 0.25) AS p25_s,
    quantile_cont(latency_s, 0.50) AS p50_s,
    quantile_cont(latency_s, 0.75) AS p75_s,
    quantile_cont(latency_s, 0.90) AS p90_s,
    quantile_cont(latency_s, 0.95) AS p95_s,
    quantile_cont(latency_s, 0.99) AS p99_s,
    max(latency_s) AS max_s
FROM t
WHERE state <> 'LOST' AND (sent_at IS NULL OR sent_at >= steady_from) AND latency_s IS NOT NULL
GROUP BY run_id;

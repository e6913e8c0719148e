-- latency_percentiles: per run, the distribution of end-to-end latency of the tasks that ran:
-- finished minus the intended send time (stream mode) or the send time, on the controller's clock
-- (task_times). Over steady_tasks (the metrics' warm-up rule), so p50/p95/p99 here equal the
-- latency_p*_s metrics.
CREATE OR REPLACE VIEW latency_percentiles AS
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
FROM steady_tasks
WHERE latency_s IS NOT NULL
GROUP BY run_id;

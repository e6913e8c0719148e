-- latency_percentiles: per run, the distribution of end-to-end latency (finished_at - sent_at)
-- of the tasks that ran. As in the metrics, tasks sent during the run's warm-up are left out,
-- so p50/p95/p99 here equal the latency_p*_s metrics.
CREATE OR REPLACE VIEW latency_percentiles AS
WITH t AS (
    -- The warm-up counts from the first task sent, lost or not (as metrics.sql does).
    SELECT t.run_id, t.sent_at, t.finished_at, t.state,
        min(t.sent_at) OVER (PARTITION BY t.run_id) + coalesce(s.warmup_s, 0) AS steady_from
    FROM tasks t JOIN run_starts s USING (run_id)
)
SELECT run_id,
    count(*) AS tasks,
    min(finished_at - sent_at) AS min_s,
    quantile_cont(finished_at - sent_at, 0.25) AS p25_s,
    quantile_cont(finished_at - sent_at, 0.50) AS p50_s,
    quantile_cont(finished_at - sent_at, 0.75) AS p75_s,
    quantile_cont(finished_at - sent_at, 0.90) AS p90_s,
    quantile_cont(finished_at - sent_at, 0.95) AS p95_s,
    quantile_cont(finished_at - sent_at, 0.99) AS p99_s,
    max(finished_at - sent_at) AS max_s
FROM t
WHERE state <> 'LOST' AND sent_at >= steady_from AND finished_at IS NOT NULL
GROUP BY run_id;

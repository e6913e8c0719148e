-- latency_spectrum: per experiment, revision and cell, the latency (finished - intended send in
-- stream mode, else - sent, on the controller's clock: task_times) of every task of the
-- cell's ok runs pooled, at HdrHistogram's percentiles, so the tail shows beyond p99. As in
-- latency_percentiles, tasks sent during a run's warm-up are left out. `runs` and `tasks` say how
-- much it rests on: p99.99 of 2,000 tasks is the second-largest value, not an estimate.
CREATE OR REPLACE VIEW latency_spectrum AS
WITH t AS (
    SELECT r.experiment, r.revision, r.cell_id, t.run_id, t.finished_at - t.origin_at AS latency_s, t.sent_at, t.state,
        t.finished_at, min(t.sent_at) OVER (PARTITION BY t.run_id) + coalesce(s.warmup_s, 0) AS steady_from
    FROM task_times t JOIN run_starts s USING (run_id) JOIN runs r USING (run_id)
    WHERE r.status = 'ok'
)
SELECT experiment, revision, cell_id,
    count(DISTINCT run_id) AS runs,
    count(*) AS tasks,
    quantile_cont(latency_s, 0.50) AS p50_s,
    quantile_cont(latency_s, 0.90) AS p90_s,
    quantile_cont(latency_s, 0.99) AS p99_s,
    quantile_cont(latency_s, 0.999) AS p999_s,
    quantile_cont(latency_s, 0.9999) AS p9999_s,
    max(latency_s) AS max_s
FROM t
WHERE state <> 'LOST' AND sent_at >= steady_from AND finished_at IS NOT NULL
GROUP BY experiment, revision, cell_id;

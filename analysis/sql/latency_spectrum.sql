-- latency_spectrum: per experiment, revision and cell, the latency (finished - intended send in
-- stream mode, else - sent, on the controller's clock: task_times) of every task of the
-- cell's ok runs pooled, at HdrHistogram's percentiles, so the tail shows beyond p99. Over
-- steady_tasks, as latency_percentiles: tasks sent during a run's warm-up are left out. `runs`
-- and `tasks` say how much it rests on: p99.99 of 2,000 tasks is the second-largest value, not
-- an estimate.
CREATE OR REPLACE VIEW latency_spectrum AS
SELECT r.experiment, r.revision, r.cell_id,
    count(DISTINCT t.run_id) AS runs,
    count(*) AS tasks,
    quantile_cont(t.latency_s, 0.50) AS p50_s,
    quantile_cont(t.latency_s, 0.90) AS p90_s,
    quantile_cont(t.latency_s, 0.99) AS p99_s,
    quantile_cont(t.latency_s, 0.999) AS p999_s,
    quantile_cont(t.latency_s, 0.9999) AS p9999_s,
    max(t.latency_s) AS max_s
FROM steady_tasks t JOIN runs r USING (run_id)
WHERE r.status = 'ok' AND t.latency_s IS NOT NULL
GROUP BY r.experiment, r.revision, r.cell_id;

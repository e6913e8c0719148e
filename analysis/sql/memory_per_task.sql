-- memory_per_task: per run, what one concurrent task costs in memory (the concurrent_sleep
-- study's measure; meaningful when every task is in flight at once, `all_in_flight`):
-- the workers' peak (PSS leads, RSS beside) minus the idle baseline, over the tasks that ran.
-- The baseline is the worker *main* processes alone (role 'worker'), at their last sampler tick
-- before the first task arrived: a prefork worker's children are pre-forked slots, so counting
-- them idle would subtract what each task really costs (a whole child) and leave ~nothing.
-- Stamps and ticks on the controller's clock (task_times, sample_times).
CREATE OR REPLACE VIEW memory_per_task AS
WITH span AS (
    SELECT run_id, min(coalesce(received_at, started_at)) AS t0, max(started_at) AS last_start,
           min(finished_at) AS first_finish, count(*) AS tasks
    FROM task_times WHERE state = 'SUCCESS' GROUP BY run_id
),
main AS (  -- per host, the main processes' sums per tick before the first task
    SELECT s.run_id, s.host, s.ts, sum(s.rss_bytes) AS rss,
           CASE WHEN count(s.pss_bytes) = count(*) THEN sum(s.pss_bytes) END AS pss
    FROM sample_times s JOIN span USING (run_id)
    WHERE s.role = 'worker' AND s.ts < span.t0 GROUP BY ALL
),
idle AS (
    SELECT run_id, sum(rss) AS idle_rss_bytes, sum(pss) AS idle_pss_bytes FROM (
        SELECT run_id, host, arg_max(rss, ts) AS rss, arg_max(pss, ts) FILTER (WHERE pss IS NOT NULL) AS pss
        FROM main GROUP BY run_id, host)
    GROUP BY run_id
),
peaks AS (
    SELECT run_id, max(value) FILTER (WHERE name = 'peak_pss_bytes') AS peak_pss_bytes,
           max(value) FILTER (WHERE name = 'peak_rss_bytes') AS peak_rss_bytes
    FROM metrics GROUP BY run_id
)
SELECT run_id, span.tasks, span.last_start < span.first_finish AS all_in_flight,
    idle.idle_pss_bytes, idle.idle_rss_bytes, peaks.peak_pss_bytes, peaks.peak_rss_bytes,
    (peaks.peak_pss_bytes - idle.idle_pss_bytes) / span.tasks AS pss_per_task_bytes,
    (peaks.peak_rss_bytes - idle.idle_rss_bytes) / span.tasks AS rss_per_task_bytes
FROM span JOIN idle USING (run_id) JOIN peaks USING (run_id);

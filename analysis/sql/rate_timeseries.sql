-- rate_timeseries: per run and whole second since the run's first task was sent, how many tasks
-- finished in that second and the queue depth (the largest sample in that second; NULL where the
-- driver took none). Seconds with nothing finished are there with 0, so stalls show as gaps in
-- the rate, and a warm-up as a ramp.
CREATE OR REPLACE VIEW rate_timeseries AS
WITH origin AS (
    SELECT run_id, min(sent_at) AS t0 FROM tasks GROUP BY run_id
),
done AS (
    SELECT t.run_id, CAST(floor(t.finished_at - o.t0) AS BIGINT) AS second, count(*) AS completed
    FROM tasks t JOIN origin o USING (run_id)
    WHERE t.finished_at IS NOT NULL AND t.state NOT IN ('LOST', 'UNSEEN')
    GROUP BY ALL
),
depth AS (
    SELECT q.run_id, CAST(floor(q.ts - o.t0) AS BIGINT) AS second, max(q.depth) AS queue_depth
    FROM queue_depth q JOIN origin o USING (run_id)
    GROUP BY ALL
),
bounds AS (
    SELECT run_id, least(min(second), 0) AS first, max(second) AS last
    FROM (SELECT run_id, second FROM done UNION ALL SELECT run_id, second FROM depth)
    GROUP BY run_id
),
seconds AS (
    SELECT run_id, unnest(range(first, last + 1)) AS second FROM bounds
)
SELECT s.run_id, s.second, coalesce(d.completed, 0) AS completed, q.queue_depth
FROM seconds s LEFT JOIN done d USING (run_id, second) LEFT JOIN depth q USING (run_id, second);

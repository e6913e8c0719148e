-- rate_timeseries: per run, how fast tasks finished over time and how deep the queue was, in
-- buckets sized to the run: the smallest width of 1, 2 or 5 times a power of ten that gives at most
-- 40 buckets (0.05 s for a run of a second, 2 s for a minute, 20 s for ten minutes).
--
-- `second`: the bucket's start, seconds since the run's first send; `width_s`: its real width. The
-- last bucket ends at the last finish and its count is divided by that width, not a whole bucket's
-- (a steady rate must not read as a fall in a partial last bucket); a last bucket narrower than
-- half a bucket is folded into the one before. `completed`: tasks finished in the bucket, `rate`
-- = completed / width_s (tasks/s); `queue_depth`: the deepest sample in it (NULL where the driver
-- took none). Buckets with nothing finished are there with 0, so stalls show as gaps, and a
-- warm-up as a ramp. Stamps and samples on the controller's clock (task_times, queue_depth_times).
CREATE OR REPLACE VIEW rate_timeseries AS
WITH ends AS (
    SELECT run_id, min(sent_at) AS t0,
           max(finished_at) FILTER (WHERE state NOT IN ('LOST', 'UNSEEN')) AS t1
    FROM task_times GROUP BY run_id
),
span AS (  -- from the first send to the last finish (the last depth sample when nothing finished)
    SELECT e.run_id, e.t0, greatest(coalesce(e.t1, d.t, e.t0), e.t0) AS t1
    FROM ends e LEFT JOIN (SELECT run_id, max(ts) AS t FROM queue_depth_times GROUP BY run_id) d USING (run_id)
    WHERE e.t0 IS NOT NULL
),
scale AS (  -- a 40th of the run (1 ms at least) and the power of ten below it
    SELECT *, pow(10, floor(log10(raw))) AS p FROM (SELECT *, greatest((t1 - t0) / 40, 0.001) AS raw FROM span)
),
width AS (
    SELECT run_id, t0, t1, w, greatest(CAST(ceil((t1 - t0) / w) AS BIGINT), 1) AS n
    FROM (SELECT *, p * CASE WHEN raw <= p THEN 1 WHEN raw <= 2 * p THEN 2 WHEN raw <= 5 * p THEN 5 ELSE 10 END AS w
          FROM scale)
),
grid AS (  -- the last bucket's index, after folding a narrow last bucket into the one before
    SELECT *, CASE WHEN n > 1 AND (t1 - t0) - (n - 1) * w < w / 2 THEN n - 2 ELSE n - 1 END AS last
    FROM width
),
buckets AS (
    SELECT run_id, k, k * w AS start, CASE WHEN k = last THEN (t1 - t0) - k * w ELSE w END AS width_s
    FROM (SELECT *, unnest(range(0, last + 1)) AS k FROM grid)
),
done AS (
    SELECT t.run_id, least(greatest(CAST(floor((t.finished_at - g.t0) / g.w) AS BIGINT), 0), g.last) AS k,
           count(*) AS completed
    FROM task_times t JOIN grid g USING (run_id)
    WHERE t.finished_at IS NOT NULL AND t.state NOT IN ('LOST', 'UNSEEN')
    GROUP BY ALL
),
depth AS (
    SELECT q.run_id, least(CAST(floor((q.ts - g.t0) / g.w) AS BIGINT), g.last) AS k, max(q.depth) AS queue_depth
    FROM queue_depth_times q JOIN grid g USING (run_id)
    WHERE q.ts BETWEEN g.t0 AND g.t1
    GROUP BY ALL
)
SELECT b.run_id, round(b.start, 6) AS second, b.width_s, coalesce(d.completed, 0) AS completed,
       coalesce(d.completed, 0) / nullif(b.width_s, 0) AS rate, q.queue_depth
FROM buckets b LEFT JOIN done d USING (run_id, k) LEFT JOIN depth q USING (run_id, k)
ORDER BY b.run_id, b.k;

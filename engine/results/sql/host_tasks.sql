-- Completed tasks per worker host of one run ($run_id; $workers: the run's worker hosts), a host
-- that did nothing included with 0, and its share of the run's completed tasks (machines > 1
-- must mean work on every host: host_share_min is the smallest share).
INSERT INTO host_tasks
WITH w AS (SELECT DISTINCT unnest($workers::VARCHAR[]) AS host),
n AS (
    SELECT w.host, count(DISTINCT t.task_id) AS done
    FROM w LEFT JOIN tasks t ON t.run_id = $run_id AND t.host = w.host AND t.state NOT IN ('LOST', 'UNSEEN')
    GROUP BY w.host
)
SELECT $run_id, host, done, done / nullif(sum(done) OVER (), 0) FROM n;

-- Per driver host of one run ($run_id): the tasks it published and its publish rate after warm-up
-- (the run's publish_rate in metrics.sql, per tasks.publisher_host). Read by ingest for
-- publish_rate_min_driver when several drivers published (the `drivers` dimension).
WITH t AS (SELECT * FROM task_times WHERE run_id = $run_id AND sent_at IS NOT NULL),
first_sent AS (SELECT min(sent_at) AS t0 FROM t),
steady AS (SELECT t.* FROM t, first_sent WHERE t.sent_at >= first_sent.t0 + $warmup_s)
SELECT publisher_host AS host, count(DISTINCT task_id) / nullif(max(sent_at) - min(sent_at), 0) AS rate
FROM steady WHERE publisher_host IS NOT NULL GROUP BY publisher_host ORDER BY publisher_host

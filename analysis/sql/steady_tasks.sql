-- steady_tasks: the task executions the latency figures are taken over: those that ran (not
-- LOST or UNSEEN) and were not sent during the run's warm-up (`run_starts.warmup_s`, counted
-- from the run's first send, lost or not: the rule metrics.sql applies at ingest), with
-- `latency_s` = finished - intended send (stream mode) or - sent, on the controller's clock
-- (task_times). A task without a send stamp is kept (nothing says it was warm-up); its latency
-- is NULL.
CREATE OR REPLACE VIEW steady_tasks AS
SELECT * EXCLUDE (steady_from)
FROM (
    SELECT t.*, t.finished_at - t.origin_at AS latency_s,
        min(t.sent_at) OVER (PARTITION BY t.run_id) + coalesce(s.warmup_s, 0) AS steady_from
    FROM task_times t JOIN run_starts s USING (run_id)
)
WHERE state NOT IN ('LOST', 'UNSEEN') AND (sent_at IS NULL OR sent_at >= steady_from);

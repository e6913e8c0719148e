-- task_times: every row of `tasks` with its stamps moved onto the controller's clock, plus the
-- moment its latency counts from. `tasks` keeps the stamps as each host recorded them; this view
-- (read by the metrics at ingest and by latency_percentiles) is the one place they are corrected.
--
-- Each stamp moves by its own host's recorded offset (hosts.clock_offset_s, host minus controller):
-- sent/intended by the publisher's, received/started/finished by the executor's. An unknown
-- offset counts as 0; a task whose two hosts differ and whose offsets are not both known is
-- `clock_unknown`. On one host both stamps move alike, so durations there never change.
-- `clock_u` is how far the clocks could still be off for the task: the sum of its two hosts'
-- offset uncertainties when they differ, 0 on one host.
-- `origin_at` is when the driver meant to send (stream mode), else the send: a driver that falls
-- behind its schedule must not hide the wait it caused (coordinated omission).
CREATE OR REPLACE VIEW task_times AS
WITH off AS (
    SELECT run_id, host, any_value(clock_offset_s) AS o, any_value(clock_uncertainty_s) AS u
    FROM hosts GROUP BY run_id, host
)
SELECT t.* REPLACE (
           t.sent_at - coalesce(po.o, 0) AS sent_at,
           t.intended_at - coalesce(po.o, 0) AS intended_at,
           t.received_at - coalesce(eo.o, 0) AS received_at,
           t.started_at - coalesce(eo.o, 0) AS started_at,
           t.finished_at - coalesce(eo.o, 0) AS finished_at),
       coalesce(t.intended_at, t.sent_at) - coalesce(po.o, 0) AS origin_at,
       CASE WHEN t.host IS NULL OR t.publisher_host IS NULL OR t.host = t.publisher_host THEN 0.0
            ELSE po.u + eo.u END AS clock_u,
       coalesce(t.host IS NOT NULL AND t.publisher_host IS NOT NULL AND t.host <> t.publisher_host
                AND (po.o IS NULL OR eo.o IS NULL), false) AS clock_unknown
FROM tasks t
-- No pub row (publisher unknown): the executor's offset for both, i.e. no correction.
LEFT JOIN off po ON po.run_id = t.run_id AND po.host = coalesce(t.publisher_host, t.host)
LEFT JOIN off eo ON eo.run_id = t.run_id AND eo.host = t.host;

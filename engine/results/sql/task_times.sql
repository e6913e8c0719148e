-- The one place stamps are moved onto the controller's clock. The tables keep every stamp as its
-- host recorded it; these views are what everything else reads (tests/unit/test_one_clock.py fails
-- on SQL or Python outside this file that reads a stamp of `tasks` straight from the table).
--
-- host_clocks: per run and host, the recorded offset (hosts.clock_offset_s, host minus controller)
-- and its uncertainty.
CREATE OR REPLACE VIEW host_clocks AS
SELECT run_id, host, any_value(clock_offset_s) AS offset_s, any_value(clock_uncertainty_s) AS uncertainty_s
FROM hosts GROUP BY run_id, host;

-- task_times: every row of `tasks` with its stamps on the controller's clock, plus the moment its
-- latency counts from (read by the metrics at ingest, the analysis views, the rate search and the
-- harness overhead).
--
-- Each stamp moves by its own host's offset: sent/intended by the publisher's,
-- received/started/finished by the executor's. An unknown offset counts as 0; a task whose two
-- hosts differ and whose offsets are not both known is `clock_unknown`. On one host both stamps
-- move alike, so durations there never change.
-- `clock_u` is how far the clocks could still be off for the task: the sum of its two hosts'
-- offset uncertainties when they differ, 0 on one host.
-- `origin_at` is when the driver meant to send (stream mode), else the send: a driver that falls
-- behind its schedule must not hide the wait it caused (coordinated omission).
CREATE OR REPLACE VIEW task_times AS
SELECT t.* REPLACE (
           t.sent_at - coalesce(po.offset_s, 0) AS sent_at,
           t.intended_at - coalesce(po.offset_s, 0) AS intended_at,
           t.received_at - coalesce(eo.offset_s, 0) AS received_at,
           t.started_at - coalesce(eo.offset_s, 0) AS started_at,
           t.finished_at - coalesce(eo.offset_s, 0) AS finished_at),
       coalesce(t.intended_at, t.sent_at) - coalesce(po.offset_s, 0) AS origin_at,
       CASE WHEN t.host IS NULL OR t.publisher_host IS NULL OR t.host = t.publisher_host THEN 0.0
            ELSE po.uncertainty_s + eo.uncertainty_s END AS clock_u,
       coalesce(t.host IS NOT NULL AND t.publisher_host IS NOT NULL AND t.host <> t.publisher_host
                AND (po.offset_s IS NULL OR eo.offset_s IS NULL), false) AS clock_unknown
FROM tasks t
-- No pub row (publisher unknown): the executor's offset for both, i.e. no correction.
LEFT JOIN host_clocks po ON po.run_id = t.run_id AND po.host = coalesce(t.publisher_host, t.host)
LEFT JOIN host_clocks eo ON eo.run_id = t.run_id AND eo.host = t.host;

-- queue_depth_times: the drivers' queue-depth samples on the controller's clock, each moved by
-- the offset of the host that took it (queue_depth.host); rows stored before that column was
-- added (NULL host) by the run's publisher (tasks.publisher_host), else its first `drivers` host.
CREATE OR REPLACE VIEW queue_depth_times AS
WITH publisher AS (
    SELECT run_id, any_value(publisher_host) AS host FROM tasks WHERE publisher_host IS NOT NULL GROUP BY run_id
),
driver AS (
    SELECT run_id, min(host) AS host FROM hosts
    WHERE list_contains(string_split(groups, ','), 'drivers') GROUP BY run_id
)
SELECT q.* REPLACE (q.ts - coalesce(c.offset_s, 0) AS ts)
FROM queue_depth q
LEFT JOIN publisher p ON p.run_id = q.run_id
LEFT JOIN driver d ON d.run_id = q.run_id
LEFT JOIN host_clocks c ON c.run_id = q.run_id AND c.host = coalesce(q.host, p.host, d.host);

-- sample_times: the samplers' ticks on the controller's clock (each host's own offset), so they
-- line up with task_times and with runs.started_at.
CREATE OR REPLACE VIEW sample_times AS
SELECT s.* REPLACE (s.ts - coalesce(c.offset_s, 0) AS ts)
FROM samples s LEFT JOIN host_clocks c USING (run_id, host);

-- fault_times: the faults a run injected, on the controller's clock: `struck_at` and `ended_at` by the
-- injecting host's offset, the workload's clock start `clock_at` and the drive's end `drive_end_at`
-- by the leading driver's host's (clock_host).
CREATE OR REPLACE VIEW fault_times AS
SELECT f.* REPLACE (f.struck_at - coalesce(h.offset_s, 0) AS struck_at, f.ended_at - coalesce(h.offset_s, 0) AS ended_at,
                    f.clock_at - coalesce(c.offset_s, 0) AS clock_at,
                    f.drive_end_at - coalesce(c.offset_s, 0) AS drive_end_at)
FROM faults f
LEFT JOIN host_clocks h ON h.run_id = f.run_id AND h.host = f.host
LEFT JOIN host_clocks c ON c.run_id = f.run_id AND c.host = f.clock_host;

-- broker_lost_times: when a worker of a fault run noticed its broker connection broken, on the
-- controller's clock (its host's offset applied).
CREATE OR REPLACE VIEW broker_lost_times AS
SELECT b.* REPLACE (b.ts - coalesce(c.offset_s, 0) AS ts)
FROM broker_lost b LEFT JOIN host_clocks c USING (run_id, host);

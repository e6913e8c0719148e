-- memory_timeseries: per run, host, role and sampler tick, memory summed over the role's
-- processes, with seconds since the run started (its run_starts record, the controller's clock; the
-- ticks moved onto it by sample_times).
-- PSS is sampled less often than RSS: a tick where any process lacks a PSS reading has pss NULL
-- rather than a partial sum that would look like a dip.
CREATE OR REPLACE VIEW memory_timeseries AS
SELECT s.run_id, s.host, s.role, s.ts,
    s.ts - epoch(r.started_at) AS t_s,
    count(*) AS processes,
    sum(s.rss_bytes) AS rss_bytes,
    CASE WHEN count(s.pss_bytes) = count(*) THEN sum(s.pss_bytes) END AS pss_bytes,
    sum(s.cpu_percent) AS cpu_percent
FROM sample_times s JOIN run_starts r USING (run_id)
GROUP BY s.run_id, s.host, s.role, s.ts, r.started_at;

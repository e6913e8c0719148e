-- connection_maxima: per run and role (broker, backend), the most connections seen at once on
-- any one host, the mean, and how many samples that rests on.
CREATE OR REPLACE VIEW connection_maxima AS
SELECT run_id, role,
    string_agg(DISTINCT kind, ',' ORDER BY kind) AS kind,
    max(count) AS max_connections,
    avg(count) AS mean_connections,
    count(*) AS samples
FROM connections
GROUP BY run_id, role;

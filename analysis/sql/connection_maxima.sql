-- connection_maxima: per run and role (broker, backend), the most connections of the run's own
-- clients seen at once on any one probe (summed over client roles at each probe tick), the mean,
-- how many ticks that rests on, and the most of the run's workers and of its driver apart
-- (NULL for runs stored before clients were told apart).
CREATE OR REPLACE VIEW connection_maxima AS
WITH ticks AS (
    SELECT run_id, role, host, ts, string_agg(DISTINCT kind, ',') AS kind, sum(count) AS n,
        sum(count) FILTER (WHERE client = 'worker') AS workers,
        sum(count) FILTER (WHERE client = 'driver') AS drivers
    FROM connections
    GROUP BY run_id, role, host, ts
)
SELECT run_id, role,
    string_agg(DISTINCT kind, ',' ORDER BY kind) AS kind,
    max(n) AS max_connections,
    avg(n) AS mean_connections,
    count(*) AS samples,
    max(workers) AS worker_max_connections,
    max(drivers) AS driver_max_connections
FROM ticks
GROUP BY run_id, role;

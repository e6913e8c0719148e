-- One row per (run, metric) for the latest run of each (cell, repeat) of an experiment:
-- what the end-of-sweep summary table aggregates per cell ($revision: one revision, or NULL for all).
WITH latest AS (
    SELECT run_id, cell_id, repeat, status
    FROM runs
    WHERE experiment = $experiment AND revision = coalesce($revision, revision)
    QUALIFY row_number() OVER (PARTITION BY cell_id, repeat ORDER BY started_at DESC) = 1
)
SELECT l.cell_id, l.repeat, l.status, m.name, m.value
FROM latest l LEFT JOIN metrics m USING (run_id)
ORDER BY l.cell_id, l.repeat;

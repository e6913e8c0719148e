-- One row per (run, metric) for the latest run of each (cell, repeat) of an experiment:
-- what the end-of-sweep summary table aggregates per cell ($revision: one revision, or NULL for all).
-- $point: the sweep whose summary this is (the first sweep of its point of history), so that only
-- its runs count, and those of the sweeps that resumed it; NULL: every sweep's.
WITH latest AS (
    SELECT r.run_id, r.cell_id, r.repeat, r.status
    FROM runs r JOIN run_starts s USING (run_id) LEFT JOIN sweeps w ON w.sweep_id = s.sweep_id
    WHERE r.experiment = $experiment AND r.revision = coalesce($revision, r.revision)
      AND ($point IS NULL OR coalesce(w.resumes, s.sweep_id) = $point)
    QUALIFY row_number() OVER (PARTITION BY r.cell_id, r.repeat ORDER BY r.started_at DESC) = 1
)
SELECT l.cell_id, l.repeat, l.status, m.name, m.value
FROM latest l LEFT JOIN metrics m USING (run_id)
ORDER BY l.cell_id, l.repeat;

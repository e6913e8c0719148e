-- cell_summary: per experiment, revision, cell and metric, statistics over the cell's *ok* runs only
-- (n, median, min, max, stddev, IQR), beside the cell's dimension columns.
-- Failed and timed-out runs are counted, never averaged in; lost tasks are summed over every run
-- of the cell (a lost task is a finding even in a failed run), and so are unseen ones (a host's
-- records not collected: they may have run there), and so are the tasks a run that did not end ok
-- stopped before (not_run_tasks: interrupted, failed, timed out; never lost). Every run ever stored counts:
-- a failed run that a resumed sweep repeated successfully still shows as one failed run.
-- A cell none of whose runs produced metrics still has one row, with metric NULL.
-- Runs of different revisions (definitions) of an experiment are never pooled: each is its own row.
CREATE OR REPLACE VIEW cell_summary AS
WITH cells AS (
    -- Dimension values are the same in every run of a cell: take them from its latest run.
    SELECT * EXCLUDE (run_id, repeat, status, error, started_at, finished_at)
    FROM runs
    QUALIFY row_number() OVER (PARTITION BY experiment, revision, cell_id ORDER BY started_at DESC, run_id) = 1
),
counts AS (
    SELECT experiment, revision, cell_id,
        count(*) AS runs,
        count(*) FILTER (WHERE status = 'ok') AS ok_runs,
        count(*) FILTER (WHERE status = 'failed') AS failed_runs,
        count(*) FILTER (WHERE status = 'timeout') AS timeout_runs
    FROM runs GROUP BY experiment, revision, cell_id
),
lost AS (
    SELECT r.experiment, r.revision, r.cell_id,
        sum(m.value) FILTER (WHERE m.name = 'tasks_lost') AS lost_tasks,
        sum(m.value) FILTER (WHERE m.name = 'tasks_unseen') AS unseen_tasks,
        sum(m.value) FILTER (WHERE m.name = 'tasks_not_run') AS not_run_tasks
    FROM runs r JOIN metrics m USING (run_id)
    WHERE m.name IN ('tasks_lost', 'tasks_unseen', 'tasks_not_run')
    GROUP BY r.experiment, r.revision, r.cell_id
),
stats AS (
    SELECT r.experiment, r.revision, r.cell_id, m.name AS metric,
        count(m.value) AS n,
        median(m.value) AS median,
        min(m.value) AS min,
        max(m.value) AS max,
        stddev_samp(m.value) AS stddev,
        quantile_cont(m.value, 0.75) - quantile_cont(m.value, 0.25) AS iqr
    FROM runs r JOIN metrics m USING (run_id)
    WHERE r.status = 'ok'
    GROUP BY r.experiment, r.revision, r.cell_id, m.name
)
SELECT cells.*, s.metric, s.n, s.median, s.min, s.max, s.stddev, s.iqr,
    c.runs, c.ok_runs, c.failed_runs, c.timeout_runs, coalesce(l.lost_tasks, 0) AS lost_tasks,
    coalesce(l.unseen_tasks, 0) AS unseen_tasks, coalesce(l.not_run_tasks, 0) AS not_run_tasks
FROM cells
JOIN counts c USING (experiment, revision, cell_id)
LEFT JOIN stats s USING (experiment, revision, cell_id)
LEFT JOIN lost l USING (experiment, revision, cell_id);

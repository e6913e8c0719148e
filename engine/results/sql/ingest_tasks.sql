-- Join one run's per-process stamp files (staged as temp tables stage_pub, stage_recv, stage_exec) into `tasks`.
-- One row per execution; a published task that never ran is one row with state $unrun: LOST when
-- every host's records were collected, else UNSEEN (the host that ran it may be the one missing).
INSERT INTO tasks
WITH p AS (
    SELECT task_id, any_value(name) AS name, any_value(host) AS host,
           min(sent_at) AS sent_at, min(intended_at) AS intended_at
    FROM stage_pub GROUP BY task_id
), r AS (
    SELECT task_id, host, min(received_at) AS received_at FROM stage_recv GROUP BY task_id, host
)
SELECT $run_id, e.task_id, e.name, e.host, e.pid, coalesce(p.sent_at, e.sent_at), r.received_at,
       e.started_at, e.finished_at, e.state, e.redelivered = 1, p.intended_at, p.host
FROM stage_exec e
LEFT JOIN p ON p.task_id = e.task_id
LEFT JOIN r ON r.task_id = e.task_id AND r.host = e.host
UNION ALL
SELECT $run_id, p.task_id, p.name, NULL, NULL, p.sent_at, NULL, NULL, NULL, $unrun, false, p.intended_at, p.host
FROM p
WHERE p.task_id NOT IN (SELECT task_id FROM stage_exec);

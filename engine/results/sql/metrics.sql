-- The headline metrics of one run ($run_id), from what was ingested for it: rows (name, value).
-- Every name is declared in engine/results/metricdefs.py, whose unit ingest stores with it.
-- Tasks sent in the first $warmup_s seconds are left out of rates and latencies (not out of counts).
-- Stamps come from the view task_times (engine/results/sql/task_times.sql): on the controller's clock
-- (hosts' recorded offsets applied), with origin_at = intended send time (stream) else send time.
WITH t AS (SELECT * FROM task_times WHERE run_id = $run_id),
first_sent AS (SELECT min(sent_at) AS t0 FROM t),
steady AS (SELECT t.* FROM t, first_sent WHERE t.sent_at IS NULL OR t.sent_at >= first_sent.t0 + $warmup_s),
ran AS (SELECT * FROM steady WHERE state NOT IN ('LOST', 'UNSEEN')),
published AS (SELECT count(DISTINCT task_id) AS n FROM t WHERE sent_at IS NOT NULL),
executed AS (SELECT * FROM t WHERE state NOT IN ('LOST', 'UNSEEN')),
done AS (SELECT count(DISTINCT task_id) AS n FROM executed),
conn_ticks AS (
    SELECT role, host, ts, sum(count) AS n FROM connections WHERE run_id = $run_id GROUP BY ALL
),
-- The server's own count of its memory (server_memory): per probe tick, summed over the nodes
-- that answered it; only ticks every node answered (a node killed mid-run would lower the sum).
mem_ticks AS (
    SELECT role, host, ts, sum(used_bytes) AS used, count(*) AS nodes FROM server_memory
    WHERE run_id = $run_id GROUP BY ALL
),
mem_whole AS (
    SELECT * FROM mem_ticks m
    WHERE nodes = (SELECT max(nodes) FROM mem_ticks w WHERE w.role = m.role AND w.host = m.host)
),
-- PSS is read only every few ticks: a peak PSS comes only from readings inside the run, between
-- the host's marks (sample_marks: the ticks that read it as the clock started and as the work
-- drained; a run that never drained has no end). A host without a clock mark: not sampled (NULL).
windows AS (
    SELECT host, min(ts) FILTER (WHERE name = 'clock') AS t0,
           coalesce(max(ts) FILTER (WHERE name = 'drain'), 'infinity'::DOUBLE) AS t1
    FROM sample_marks WHERE run_id = $run_id GROUP BY host
),
in_run AS (
    SELECT s.* FROM samples s JOIN windows w ON s.host = w.host AND s.ts BETWEEN w.t0 AND w.t1
    WHERE s.run_id = $run_id
),
-- Memory: per host and sampler tick, the sum over worker processes; then the peak per host,
-- added up over hosts (ticks of different hosts are not aligned, so this is an upper bound).
worker_ticks AS (
    SELECT host, ts, sum(rss_bytes) AS rss FROM samples
    WHERE run_id = $run_id AND role IN ('worker', 'worker-child') GROUP BY host, ts
),
worker_pss_ticks AS (  -- only ticks that read PSS of every worker process
    SELECT host, ts, sum(pss_bytes) AS pss FROM in_run
    WHERE role IN ('worker', 'worker-child') GROUP BY host, ts HAVING count(pss_bytes) = count(*)
),
-- A fault run (the fault dimension): its first fault that struck, on the controller's clock, and
-- the run's end (the leading driver stopped waiting: settled or timed out; fault_times.drive_end_at);
-- the completions; the rate before the fault (first start to the fault) and a window holding about
-- ten completions at that rate (at least 1 s), in which recovery is judged.
fault AS (
    SELECT min(struck_at) AS t, arg_min(clock_at, struck_at) AS clock_at, max(drive_end_at) AS run_end
    FROM fault_times WHERE run_id = $run_id AND error IS NULL AND struck_at IS NOT NULL
),
completions AS (SELECT finished_at AS c FROM executed WHERE finished_at IS NOT NULL),
after_fault AS (SELECT c FROM completions, fault WHERE c >= fault.t),
-- Published tasks no completion was seen of (lost, or still running when the run ended).
unfinished AS (
    SELECT count(DISTINCT p.task_id) AS n FROM t p WHERE p.sent_at IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM executed e WHERE e.task_id = p.task_id AND e.finished_at IS NOT NULL)
),
pre_fault AS (
    SELECT (SELECT count(*) FROM completions, fault WHERE c < fault.t)
           / nullif((SELECT t FROM fault) - (SELECT min(started_at) FROM executed), 0) AS rate
),
recovery_window AS (SELECT rate, greatest(1.0, 10.0 / rate) AS w FROM pre_fault WHERE rate > 0),
-- The longest time without a completion from the fault on (the fault's moment counts as the first
-- completion), and what ended it. While tasks remain unfinished, the time from the last completion
-- (or the fault) to the run's end is a stall too, one no completion ended (censored: it lasted at
-- least that long). Tasks unfinished and the run's end unknown: the stall is unknown (NULL).
run_tail AS (
    SELECT f.run_end AS c FROM fault f, unfinished u
    WHERE u.n > 0 AND f.run_end > greatest(f.t, coalesce((SELECT max(c) FROM after_fault), f.t))
),
points AS (
    SELECT c, false AS censored FROM after_fault UNION ALL SELECT t, false FROM fault
    UNION ALL SELECT c, true FROM run_tail
),
gaps AS (SELECT c, censored, c - lag(c) OVER (ORDER BY c, censored) AS gap FROM points),
stall AS (
    SELECT CASE WHEN (SELECT n FROM unfinished) > 0 AND (SELECT run_end FROM fault) IS NULL THEN NULL
                ELSE max(gap) END AS s,
           coalesce(bool_or(censored) FILTER (WHERE gap = (SELECT max(gap) FROM gaps)), false) AS censored,
           coalesce(min(c) FILTER (WHERE gap = (SELECT max(gap) FROM gaps) AND NOT censored),
                    max(c) FILTER (WHERE censored)) AS ended
    FROM gaps WHERE gap IS NOT NULL
),
-- The concurrent_sleep workload (workloads/catalog/concurrent_sleep.py): the most of its tasks in
-- flight at once (started, not yet finished; a finish before a start at the same stamp), and the
-- workers' idle PSS: per host, the worker main processes' (role 'worker': a prefork worker's
-- children are pre-forked slots, part of what a task costs) last PSS reading before the first task
-- arrived, summed over hosts; NULL when a host has none.
sleeps AS (SELECT * FROM executed WHERE name = 'cmx.concurrent_sleep.sleep' AND started_at IS NOT NULL),
in_flight AS (
    SELECT max(n) AS n FROM (
        SELECT sum(d) OVER (ORDER BY ts, d ROWS UNBOUNDED PRECEDING) AS n
        FROM (SELECT started_at AS ts, 1 AS d FROM sleeps
              UNION ALL SELECT finished_at, -1 FROM sleeps WHERE finished_at IS NOT NULL))
),
idle_main AS (
    SELECT s.host, s.ts, CASE WHEN count(s.pss_bytes) = count(*) THEN sum(s.pss_bytes) END AS pss
    FROM sample_times s
    WHERE s.run_id = $run_id AND s.role = 'worker'
      AND s.ts < (SELECT min(coalesce(received_at, started_at)) FROM sleeps)
    GROUP BY s.host, s.ts
),
idle AS (
    SELECT CASE WHEN count(pss) = (SELECT count(DISTINCT host) FROM worker_ticks) THEN sum(pss) END AS pss
    FROM (SELECT host, arg_max(pss, ts) AS pss FROM idle_main WHERE pss IS NOT NULL GROUP BY host)
),
-- Starved: the run's workers held no task (none received and not yet finished) while some task
-- waited in the broker (sent, not yet received), for half a second or more at a stretch, as a
-- share of the run from its first receipt to its last finish (before the first receipt the
-- workers may be held off on purpose: a backlog). Shorter stretches are a worker fetching one
-- message per round trip, or a message on its way (milliseconds each, however many), not a stall;
-- a green worker at its prefetch limit on Redis idles ~2 s at a stretch
-- (experiments/pitfalls/green-one-slot.yaml). One sweep over the moments a task entered or left a
-- worker or the broker; the stretches are runs of consecutive idle-while-waiting spans.
in_worker AS (
    SELECT coalesce(received_at, started_at) AS a, finished_at AS b FROM executed
    WHERE coalesce(received_at, started_at) IS NOT NULL
),
in_broker AS (
    SELECT sent_at AS a, coalesce(received_at, started_at) AS b FROM executed
    WHERE sent_at IS NOT NULL AND coalesce(received_at, started_at) > sent_at
),
starve_span AS (SELECT min(a) AS lo, max(b) AS hi FROM in_worker),
starve_moments AS (
    SELECT ts, busy, waiting, row_number() OVER (ORDER BY ts, busy, waiting) AS i FROM (
        SELECT a AS ts, 1 AS busy, 0 AS waiting FROM in_worker
        UNION ALL SELECT b, -1, 0 FROM in_worker WHERE b IS NOT NULL
        UNION ALL SELECT a, 0, 1 FROM in_broker
        UNION ALL SELECT b, 0, -1 FROM in_broker
    )
),
starve_levels AS (
    SELECT ts, lead(ts) OVER (ORDER BY i) AS next_ts, i,
           sum(busy) OVER (ORDER BY i ROWS UNBOUNDED PRECEDING) = 0
               AND sum(waiting) OVER (ORDER BY i ROWS UNBOUNDED PRECEDING) > 0 AS idle
    FROM starve_moments
),
starve_stretches AS (  -- each run of idle spans one stretch: numbered by the spans before it that were not
    SELECT idle, greatest(0, least(l.next_ts, s.hi) - greatest(l.ts, s.lo)) AS len,
           sum(CASE WHEN idle THEN 0 ELSE 1 END) OVER (ORDER BY i ROWS UNBOUNDED PRECEDING) AS stretch
    FROM starve_levels l, starve_span s WHERE l.next_ts IS NOT NULL
),
starved AS (
    SELECT (SELECT coalesce(sum(len), 0) FROM (
                SELECT sum(len) AS len FROM starve_stretches WHERE idle GROUP BY stretch
            ) WHERE len >= 0.5) AS s,
           (SELECT hi - lo FROM starve_span) AS span
),
worker_peaks AS (
    SELECT r.host, r.rss, p.pss
    FROM (SELECT host, max(rss) AS rss FROM worker_ticks GROUP BY host) r
    LEFT JOIN (SELECT host, max(pss) AS pss FROM worker_pss_ticks GROUP BY host) p USING (host)
)
SELECT 'tasks_published', (SELECT n FROM published)
UNION ALL SELECT 'tasks_completed', (SELECT n FROM done)
-- A host's records not collected (it dropped off, its pack was lost): its tasks are UNSEEN, not
-- LOST, and tasks_lost is unknown (NULL), never a count of tasks that may well have run.
UNION ALL SELECT 'tasks_lost',
    (SELECT CASE WHEN count(*) FILTER (WHERE state = 'UNSEEN') = 0 THEN count(*) FILTER (WHERE state = 'LOST') END FROM t)
UNION ALL SELECT 'tasks_unseen', (SELECT count(*) FROM t WHERE state = 'UNSEEN')
UNION ALL SELECT 'tasks_duplicated', (SELECT count(*) - count(DISTINCT task_id) FROM executed)
UNION ALL SELECT 'tasks_redelivered', (SELECT count(*) FILTER (WHERE redelivered) FROM t)
UNION ALL SELECT 'tasks_failed', (SELECT count(*) FROM executed WHERE state <> 'SUCCESS')
-- Faults: when the first struck (seconds from the workload's clock start), the longest time
-- without a completion from it on (NULL when nothing finished after it and nothing remained
-- unfinished), whether that stall ran to the run's end with tasks unfinished (stall_censored: no
-- completion ended it), and how long until completions were back at 90 % of the pre-fault rate
-- over a whole window after it and after that stall (NULL: never; always so after a censored
-- stall). "Back" is after the stall: the tasks a worker held when the broker went away may finish
-- at full rate for a moment and then nothing does for half a minute
-- (restart-broker-rabbitmq.yaml, threads), which is no recovery.
UNION ALL SELECT 'fault_at_s', t - clock_at FROM fault WHERE t IS NOT NULL
UNION ALL SELECT 'stall_s', (SELECT s FROM stall) FROM fault WHERE t IS NOT NULL
UNION ALL SELECT 'stall_censored', (SELECT CASE WHEN s IS NOT NULL THEN censored::INTEGER END FROM stall)
    FROM fault WHERE t IS NOT NULL
-- When a worker first noticed its broker connection broken (its consumer's "Connection to broker
-- lost"), seconds after the fault struck; NULL when none did.
UNION ALL SELECT 'detect_s', (SELECT min(b.ts) FROM broker_lost_times b WHERE b.run_id = $run_id AND b.ts >= fault.t)
    - fault.t FROM fault WHERE t IS NOT NULL
UNION ALL SELECT 'recovery_s',
    (SELECT min(a.c - f.t) FROM after_fault a, fault f, recovery_window r, stall st
     WHERE NOT st.censored AND a.c - r.w >= f.t AND a.c >= st.ended
       AND (SELECT count(*) FROM completions b WHERE b.c > a.c - r.w AND b.c <= a.c) >= 0.9 * r.rate * r.w)
    FROM fault WHERE t IS NOT NULL
UNION ALL SELECT 'publish_rate',
    (SELECT count(DISTINCT task_id) / nullif(max(sent_at) - min(sent_at), 0) FROM steady WHERE sent_at IS NOT NULL)
UNION ALL SELECT 'consume_rate',
    (SELECT count(*) / nullif(max(finished_at) - min(started_at), 0) FROM ran)
UNION ALL SELECT 'makespan_s', (SELECT max(finished_at) - min(started_at) FROM executed)
UNION ALL SELECT 'latency_p50_s', (SELECT quantile_cont(finished_at - origin_at, 0.50) FROM ran)
UNION ALL SELECT 'latency_p95_s', (SELECT quantile_cont(finished_at - origin_at, 0.95) FROM ran)
UNION ALL SELECT 'latency_p99_s', (SELECT quantile_cont(finished_at - origin_at, 0.99) FROM ran)
UNION ALL SELECT 'queue_wait_p50_s', (SELECT quantile_cont(started_at - origin_at, 0.50) FROM ran)
UNION ALL SELECT 'queue_wait_p95_s', (SELECT quantile_cont(started_at - origin_at, 0.95) FROM ran)
UNION ALL SELECT 'queue_wait_p99_s', (SELECT quantile_cont(started_at - origin_at, 0.99) FROM ran)
UNION ALL SELECT 'service_time_p50_s', (SELECT quantile_cont(finished_at - started_at, 0.50) FROM ran)
UNION ALL SELECT 'service_time_p95_s', (SELECT quantile_cont(finished_at - started_at, 0.95) FROM ran)
UNION ALL SELECT 'service_time_p99_s', (SELECT quantile_cont(finished_at - started_at, 0.99) FROM ran)
-- Clock trust: the worst sum of the two hosts' offset uncertainties over cross-host tasks (0 when
-- every task ran where it was published), and the tasks whose offsets were not both known.
UNION ALL SELECT 'clock_uncertainty_s', (SELECT max(clock_u) FROM t)
UNION ALL SELECT 'clock_uncorrected_tasks', (SELECT count(*) FILTER (WHERE clock_unknown) FROM t)
-- 1 when the clocks could move the latency by more than a tenth of its median: read latencies
-- across hosts with care (status and report show it).
UNION ALL SELECT 'clock_suspect',
    (SELECT CASE WHEN count(*) FILTER (WHERE clock_unknown) > 0 THEN 1
                 WHEN max(clock_u) > 0.1 * (SELECT quantile_cont(finished_at - origin_at, 0.50) FROM ran) THEN 1
                 ELSE 0 END FROM t)
UNION ALL SELECT 'send_lag_p99_s',
    (SELECT quantile_cont(sent_at - intended_at, 0.99) FROM steady WHERE intended_at IS NOT NULL)
UNION ALL SELECT 'peak_rss_bytes', (SELECT sum(rss) FROM worker_peaks)
-- NULL (not sampled) when any worker host has no PSS reading inside the run: never a partial sum.
UNION ALL SELECT 'peak_pss_bytes', (SELECT CASE WHEN count(pss) = count(*) THEN sum(pss) END FROM worker_peaks)
-- concurrent_sleep: memory per concurrent task, the peak PSS above the idle workers over the most
-- tasks in flight at once (reference/concurrent-tasks-memory.txt's question); no row for other workloads.
UNION ALL SELECT 'tasks_in_flight_max', n FROM in_flight WHERE (SELECT count(*) FROM sleeps) > 0
UNION ALL SELECT 'memory_per_task_bytes',
    ((SELECT CASE WHEN count(pss) = count(*) THEN sum(pss) END FROM worker_peaks) - (SELECT pss FROM idle))
    / nullif((SELECT n FROM in_flight), 0)
    WHERE (SELECT count(*) FROM sleeps) > 0
UNION ALL SELECT 'worker_vmhwm_max_bytes',
    (SELECT max(vmhwm_bytes) FROM peaks WHERE run_id = $run_id AND role IN ('worker', 'worker-child'))
-- Connections: the run's own clients only (the probes count the names cmx clients give
-- themselves), per probe tick summed over client roles, then the most at once.
-- NULL, not 0, when no tick saw any of the run's clients on the broker: its workers always hold a
-- broker connection, so 0 means the probe did not see them (RabbitMQ's management API lists a
-- connection only after its next stats collection, 5 s by default on a broker cmx did not set up).
UNION ALL SELECT 'broker_connections_max',
    (SELECT nullif(max(n), 0) FROM conn_ticks WHERE role = 'broker')
UNION ALL SELECT 'backend_connections_max',
    (SELECT max(n) FROM conn_ticks WHERE role = 'backend')
-- The broker's memory by its own accounting: the most at a tick, and that minus the first tick's
-- (the sampler starts before the run's workers); NULL without a reading (the server cannot say).
UNION ALL SELECT 'broker_memory_peak_bytes',
    (SELECT max(used) FROM mem_whole WHERE role = 'broker')
UNION ALL SELECT 'broker_memory_growth_bytes',
    (SELECT max(used) - arg_min(used, ts) FROM mem_whole WHERE role = 'broker')
-- ...and per client role: broker_connections_worker_max, backend_connections_driver_max, ...
UNION ALL
SELECT role || '_connections_' || client || '_max', max(n)
FROM (SELECT role, client, host, ts, sum(count) AS n FROM connections
      WHERE run_id = $run_id AND client IS NOT NULL GROUP BY ALL)
GROUP BY role, client
-- Per slot of a pre-forking pool (prefork: one child process per slot): on each tick, the
-- children's summed memory over their number; the most of that over the run (max over hosts).
-- Summed RSS counts the pages a child shares with its parent in every child; PSS splits them.
-- Only runs whose workers have children get these.
UNION ALL
SELECT 'peak_' || kind || '_per_slot_bytes', max(per_slot)
FROM (
    SELECT 'rss' AS kind, sum(rss_bytes) / count(*) AS per_slot
    FROM samples WHERE run_id = $run_id AND role = 'worker-child' GROUP BY host, ts
    UNION ALL
    SELECT 'pss', sum(pss_bytes) / count(*)
    FROM in_run WHERE role = 'worker-child' GROUP BY host, ts
    HAVING count(pss_bytes) = count(*)
)
GROUP BY kind
-- NULL when no task ran or the run's tasks took no time at all.
UNION ALL SELECT 'worker_starved_share', (SELECT s / nullif(span, 0) FROM starved)
UNION ALL SELECT 'queue_depth_max', (SELECT max(depth) FROM queue_depth WHERE run_id = $run_id)
-- The mixed workload (workloads/catalog/mixed.py): short tasks apart from long ones; no row for other workloads.
UNION ALL SELECT 'short_latency_p50_s', quantile_cont(finished_at - coalesce(intended_at, sent_at), 0.50)
    FROM ran WHERE name = 'cmx.mixed.short' HAVING count(*) > 0
UNION ALL SELECT 'short_latency_p99_s', quantile_cont(finished_at - coalesce(intended_at, sent_at), 0.99)
    FROM ran WHERE name = 'cmx.mixed.short' HAVING count(*) > 0
-- Short tasks that took over half a long task's run time: they waited behind one.
UNION ALL SELECT 'short_delayed_share',
    avg(CASE WHEN finished_at - coalesce(intended_at, sent_at) > 0.5 * (
        SELECT median(finished_at - started_at) FROM ran WHERE name = 'cmx.mixed.long') THEN 1.0 ELSE 0.0 END)
    FROM ran WHERE name = 'cmx.mixed.short' HAVING count(*) > 0
    AND (SELECT count(*) FROM ran WHERE name = 'cmx.mixed.long') > 0
-- Per role (worker counts its children): peak over ticks of the summed processes, added over hosts.
UNION ALL
SELECT 'peak_' || kind || '_bytes_' || role, sum(peak)
FROM (
    SELECT role, host, 'rss' AS kind, max(v) AS peak
    FROM (SELECT CASE WHEN role = 'worker-child' THEN 'worker' ELSE role END AS role, host, ts, sum(rss_bytes) AS v
          FROM samples WHERE run_id = $run_id AND role <> 'sampler' GROUP BY ALL)
    GROUP BY role, host
    UNION ALL
    SELECT role, host, 'pss', max(v)
    FROM (SELECT CASE WHEN role = 'worker-child' THEN 'worker' ELSE role END AS role, host, ts, sum(pss_bytes) AS v
          FROM in_run WHERE role <> 'sampler' GROUP BY ALL
          HAVING count(pss_bytes) = count(*))
    GROUP BY role, host
)
GROUP BY kind, role;

"""The metrics particular workloads report (mixed's short tasks, chords, io_chord, sql_fanout), those
ramp and rate-search runs are judged and rebuilt from, and the facts a run's probes and completions
give (queue depth, the smallest host's share). Part of the registry ``metricdefs.METRICS``, in its order."""

from __future__ import annotations

from cmx.engine.results.metrictypes import Better, MetricDef
from cmx.workloads.vocab import metrics as M

_H, _L, _N = Better.HIGHER, Better.LOWER, Better.NEITHER

WORKLOAD_METRICS: tuple[MetricDef, ...] = (
    MetricDef(M.SHORT_LATENCY_P50_S, "s", _L, "short p50", "p50 latency of the mixed workload's short tasks"),
    MetricDef(M.SHORT_LATENCY_P99_S, "s", _L, "short p99", "p99 latency of the mixed workload's short tasks"),
    MetricDef(
        M.SHORT_DELAYED_SHARE,
        "share",
        _L,
        "shorts delayed",
        "share of short tasks that took over half a long task: they waited behind one",
    ),
    MetricDef(M.CHORD_CALLBACK_S, "s", _L, "to callback", "chord sent to its callback's result (median)"),
    MetricDef(M.CHORD_CALLBACK_PER_TASK_S, "s", _L, "per header task", "chord_callback_s over the header size"),
    MetricDef(
        M.BACKEND_COMMANDS_APPROX,
        "commands",
        _N,
        "backend cmds ~",
        "backend Redis commands per chord, server-wide (an upper bound)",
    ),
    MetricDef(M.QUEUE_DEPTH_MAX, "messages", _N, "max queue depth", "deepest the run's queue was at a probe"),
    # io_chord (workloads/catalog/io_chord.py)
    MetricDef(M.CHORDS_MAKESPAN_S, "s", _L, "chords makespan", "first header task started to last finished"),
    MetricDef(M.HEADER_TASKS, "tasks", _N, "header tasks", "header tasks the chords' callbacks counted"),
    MetricDef(M.SERVICE_SLEPT_S, "s", _N, "service slept", "seconds the slow service slept, summed over calls"),
    MetricDef(M.SERVICE_REQUESTS, "requests", _N, "service requests", "requests the slow service answered"),
    MetricDef(
        M.SERVICE_DISTINCT_IDS,
        "requests",
        _N,
        "distinct requests",
        "distinct header task ids among the service's requests",
    ),
    # sql_fanout (workloads/catalog/sql_fanout.py): a web request = a group of SQL queries
    *(
        MetricDef(M.request(p), "s", _L, f"p{p} request", f"p{p} of a web request's time, sent to all rows back")
        for p in M.PERCENTILES
    ),
    MetricDef(M.REQUEST_MEAN_S, "s", _L, "mean request", "mean of a web request's time"),
    MetricDef(M.REQUESTS_PER_S, "requests/s", _H, "requests", "web requests answered per second (after warm-up)"),
    MetricDef(M.RESULTS_CORRECT, "", _N, "correct", "1 when the first request's rows equal a direct query's"),
    MetricDef(M.RESULT_ROWS, "rows", _N, "rows", "rows one web request returns"),
    # ramp search runs (workloads/drive/ramp.py): what the judge rebuilds the steps from
    MetricDef(M.RAMP_STEPS_RUN, "steps", _N, "ramp steps", "steps the ramp ran before it stopped"),
    MetricDef(M.RAMP_START_RATE, "tasks/s", _N, "ramp start", "the ramp's first step rate"),
    MetricDef(M.RAMP_FACTOR, "", _N, "ramp factor", "each step's rate over the one before"),
    MetricDef(M.RAMP_STEP_S, "s", _N, "ramp step", "seconds per ramp step"),
    MetricDef(
        M.HOST_SHARE_MIN,
        "share",
        _H,
        "min host share",
        "the smallest worker host's share of completed tasks (machines > 1; 1/machines is even)",
    ),
    MetricDef(
        M.MAX_SUSTAINABLE_RATE,
        "tasks/s",
        _H,
        "max sustainable",
        "a search run's highest ramp step that kept up (engine/plan/ratesearch.py)",
    ),
    MetricDef(M.TARGET_RATE, "tasks/s", _N, "target rate", "a rate_fraction run's rate: fraction × max sustainable"),
    MetricDef(
        M.DRAINED_RATE,
        "tasks/s",
        _H,
        "drained",
        "throughput backlog: tasks / (consuming started to all done by the workers' own counts, "
        "polled every 0.2 s); needs no per-task stamps",
    ),
)

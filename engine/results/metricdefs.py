"""The metric registry: every metric cmx computes, declared once (as Celery's settings table does).

Ingest (the unit stored), summary, compare, report and the views read this table for a metric's
unit, its label, which direction is better and its family; adding a metric is one entry here plus
its computation (a row of ``sql/metrics.sql``, or a workload's ``ctx.metric``). Workloads name
which of these are their headline (``Workload.headline_metrics``); a user's workload class may
report metrics of its own, which :func:`get` describes from their names. The names themselves
are written once, in the vocabulary (workloads/vocab/metrics.py), which the workloads read too.
"""

from __future__ import annotations

from cmx.engine.results.metrictypes import GROUPS as GROUPS, HARNESS, HEADLINE, NOISE, OTHER, Better, MetricDef
from cmx.engine.results.resourcemetrics import PROCESS_ROLES as PROCESS_ROLES, RESOURCE_METRICS
from cmx.engine.results.workloadmetrics import WORKLOAD_METRICS
from cmx.workloads.vocab import metrics as M

_H, _L, _N = Better.HIGHER, Better.LOWER, Better.NEITHER

METRICS: dict[str, MetricDef] = {
    m.name: m
    for m in (
        MetricDef(M.TASKS_PUBLISHED, "tasks", _N, "published", "tasks the driver published"),
        MetricDef(M.TASKS_COMPLETED, "tasks", _N, "completed", "distinct tasks that ran to an end"),
        MetricDef(
            M.TASKS_LOST,
            "tasks",
            _L,
            "lost",
            "published and never executed by a run that ended ok, or by a run failed for exactly those tasks lost "
            "before the queue (its error says so) (NULL when a host's records were not collected: tasks_unseen; "
            "or when the run did not end ok otherwise: tasks_not_run)",
        ),
        MetricDef(
            M.TASKS_NOT_RUN,
            "tasks",
            _N,
            "not run",
            "published and not executed by a run that did not end ok (interrupted, failed, timed out): it "
            "stopped before them, so they are not counted as lost (tasks_lost is NULL then)",
        ),
        MetricDef(
            M.TASKS_UNSEEN,
            "tasks",
            _L,
            "unseen",
            "published, not seen executing, and a host's records were not collected: they may have run",
        ),
        MetricDef(M.TASKS_DUPLICATED, "tasks", _L, "duplicated", "executions beyond the first of a task"),
        MetricDef(M.TASKS_REDELIVERED, "tasks", _L, "redelivered", "deliveries flagged redelivered by the broker"),
        MetricDef(M.TASKS_FAILED, "tasks", _L, "failed", "tasks that ended in a state other than SUCCESS"),
        # Fault runs (the fault dimension): measured from the first fault that struck.
        MetricDef(
            M.FAULT_AT_S,
            "s",
            _N,
            "fault at",
            "when the first fault struck, seconds from the workload's clock start (the injecting host's clock, "
            "corrected)",
        ),
        MetricDef(
            M.STALL_S,
            "s",
            _L,
            "stall",
            "the longest time without a task finishing, from the fault on; while published tasks remain "
            "unfinished, the time from the last completion to the run's end counts too (the run's end: when "
            "the leading driver stopped waiting, its faults over and limits.settle without a completion, or "
            "the run's timeout; on the controller's clock, as the task stamps); NULL when tasks remain "
            "unfinished and the run's end is not known",
        ),
        MetricDef(
            M.STALL_CENSORED,
            "flag",
            _L,
            "stall censored",
            "1 when the longest stall is the one that ran to the run's end with tasks unfinished: no completion "
            "ended it, so it lasted at least stall_s (and the run never recovered); 0 when a completion ended it",
        ),
        MetricDef(
            M.RECOVERY_S,
            "s",
            _L,
            "recovery",
            "from the fault until tasks finish at 90 % of the pre-fault rate again after the stall (over a window "
            "of about ten pre-fault completions); NULL when they never do (shown as never), always so after a "
            "censored stall",
        ),
        MetricDef(
            M.DETECT_S,
            "s",
            _L,
            "detect",
            "from the fault until a worker of the run first noticed its broker connection broken (its consumer "
            "logged \"Connection to broker lost\"; the worker host's clock, corrected); NULL when none did",
        ),
        MetricDef(M.PUBLISH_RATE, "tasks/s", _H, "publish", "tasks published per second (after warm-up)"),
        MetricDef(
            M.PUBLISH_RATE_MIN_DRIVER,
            "tasks/s",
            _H,
            "slowest driver",
            "drivers > 1: the slowest driver host's publish rate (publish_rate is the whole run's)",
        ),
        MetricDef(
            M.PUBLISH_BATCH,
            "messages",
            _N,
            "publish batch",
            "via raw: messages per round trip the server acknowledged (1: one call per message)",
        ),
        MetricDef(M.CONSUME_RATE, "tasks/s", _H, "consume", "tasks finished per second (after warm-up)"),
        MetricDef(M.MAKESPAN_S, "s", _L, "makespan", "first task started to last task finished"),
        MetricDef(
            M.WORKER_STARVED_SHARE,
            "share",
            _L,
            "starved",
            "share of the run (first task received to last finished) in which the workers held no task while a "
            "task waited in the broker, in stretches of 0.5 s or more",
        ),
        # Latency: finished minus the intended send time where the driver has one (stream mode), else
        # minus the send; queue wait and service time split it at the task's start. All on the
        # controller's clock (hosts' offsets applied; see engine/results/sql/task_times.sql).
        *(
            MetricDef(
                M.latency(p),
                "s",
                _L,
                f"p{p} latency",
                f"p{p} of finished − intended send (stream) or − sent (backlog): what a caller waits",
                "latency",
            )
            for p in M.PERCENTILES
        ),
        *(
            MetricDef(
                M.queue_wait(p),
                "s",
                _L,
                f"p{p} queue wait",
                f"p{p} of started − intended send (stream) or − sent (backlog)",
                "queue wait",
            )
            for p in M.PERCENTILES
        ),
        *(
            MetricDef(M.service_time(p), "s", _L, f"p{p} service", f"p{p} of finished − started", "service time")
            for p in M.PERCENTILES
        ),
        MetricDef(
            M.CLOCK_UNCERTAINTY_S,
            "s",
            _L,
            "clock ±",
            "worst sum of the two hosts' clock-offset uncertainties over tasks run off their publisher's host",
            group=HARNESS,
        ),
        MetricDef(
            M.CLOCK_UNCORRECTED_TASKS,
            "tasks",
            _L,
            "unclocked",
            "tasks run off their publisher's host where a host's clock offset is unknown",
            group=HARNESS,
        ),
        MetricDef(
            M.CLOCK_SUSPECT,
            "flag",
            _L,
            "clock suspect",
            "1 when clocks could move latency by over a tenth of its median (or an offset is unknown)",
            group=HARNESS,
        ),
        MetricDef(M.SEND_LAG_P99_S, "s", _L, "p99 send lag", "p99 of sent − intended send (stream): the driver's lag"),
        MetricDef(
            M.PUBLISH_BEHIND,
            "tasks",
            _L,
            "behind",
            "stream: publishes the drivers made later than their intended send time",
            over_drivers="sum",
        ),
        *RESOURCE_METRICS,
        *WORKLOAD_METRICS,
        MetricDef(
            M.HARNESS_OVERHEAD_S,
            "s",
            _L,
            "harness",
            "run wall time (start to stored) minus the time tasks were in flight (first sent to last finished)",
            group=HARNESS,
        ),
        # The noise group: the host's load from outside the run over the run's window (worst host;
        # per host in ``host_noise``), read from /proc by the sampler (workloads/host/noise.py). Never
        # judged (a busier host is no worse configuration): analysis/noise.py says when it differs.
        MetricDef(
            M.NOISE_CPU_SHARE,
            "share",
            _N,
            "outside CPU",
            "CPU the host's processes outside the run used, as a share of its cores (busy CPU in /proc/stat "
            "minus the run's sampled processes'), over the run; most over hosts",
            group=NOISE,
        ),
        MetricDef(
            M.NOISE_STEAL_SHARE,
            "share",
            _N,
            "steal",
            "CPU time the hypervisor gave others (/proc/stat steal) as a share of the host's cores; most over hosts",
            group=NOISE,
        ),
        MetricDef(
            M.NOISE_LOAD1,
            "share",
            _N,
            "load per core",
            "mean 1-minute load average over the run divided by the host's cores; most over hosts",
            group=NOISE,
        ),
        MetricDef(
            M.NOISE_PSI_CPU_SOME_SHARE,
            "share",
            _N,
            "CPU pressure",
            "share of the run's wall time some task waited for a CPU (/proc/pressure/cpu some); most over hosts; "
            "absent where the kernel has no PSI",
            group=NOISE,
        ),
        MetricDef(
            M.NOISE_PSI_MEMORY_SOME_SHARE,
            "share",
            _N,
            "memory pressure",
            "share of the run's wall time some task stalled on memory (/proc/pressure/memory some); most over "
            "hosts; absent where the kernel has no PSI",
            group=NOISE,
        ),
    )
}


#: The metric columns of the view ``run_summary``, in order (analysis/sql/run_summary.sql is
#: generated from this: ``python -m cmx.analysis.views``).
RUN_SUMMARY_COLUMNS = (
    M.TASKS_PUBLISHED,
    M.TASKS_COMPLETED,
    M.TASKS_LOST,
    M.TASKS_DUPLICATED,
    M.PUBLISH_RATE,
    M.CONSUME_RATE,
    M.MAKESPAN_S,
    M.LATENCY_P50_S,
    M.LATENCY_P95_S,
    M.LATENCY_P99_S,
    M.PEAK_RSS_BYTES,
    M.PEAK_PSS_BYTES,
    M.BROKER_CONNECTIONS_MAX,
    M.BACKEND_CONNECTIONS_MAX,
)
#: What a fault cell's summary leads with (beside lost, its own column): what the fault did to delivery.
FAULT_HEADLINE = (
    M.TASKS_DUPLICATED,
    M.TASKS_REDELIVERED,
    M.TASKS_FAILED,
    M.STALL_S,
    M.STALL_CENSORED,
    M.RECOVERY_S,
    M.DETECT_S,
)
#: Metrics whose NULL in a run that has the row is a finding, shown as "never": a fault run's
#: recovery_s (runs without a fault have no row at all).
NEVER_WHEN_NULL = (M.RECOVERY_S,)
#: Facts any workload's runs may carry: the report's summary table shows them beside the
#: workload's headline metrics when some run has them.
FACTS = (M.HOST_SHARE_MIN, M.PUBLISH_RATE_MIN_DRIVER, M.CLOCK_SUSPECT, M.BROKER_MEMORY_PEAK_BYTES)


def _guess_unit(name: str) -> str:
    """The unit of a metric not declared here (a user's workload's own), from its name."""
    if name.endswith("_bytes") or "_bytes_" in name:
        return "bytes"
    if name.endswith(("_rate", "_per_s")):
        return "/s"
    if name.endswith("_s"):
        return "s"
    return ""


def get(name: str) -> MetricDef:
    """The metric's definition; a metric not declared here (a user workload's own) is unjudged,
    its unit read from its name's ending (``_bytes``, ``_rate``/``_per_s``, ``_s``)."""
    return METRICS.get(name) or MetricDef(name, _guess_unit(name), Better.NEITHER, name.replace("_", " "))


def group_of(name: str, headline: frozenset[str] | set[str] = frozenset()) -> str:
    """The group a metric is shown in: ``headline`` when the user's headline holds it (the
    workload's, the experiment's objective and thresholds), else its declared group (harness,
    noise), else ``harness`` for a count or fact with no better direction (tasks published, a
    ramp's steps: fixed by the experiment, never a finding), else ``other``."""
    if name in headline:
        return HEADLINE
    declared = get(name)
    if declared.group:
        return declared.group
    if name in METRICS and declared.better is Better.NEITHER:
        return HARNESS
    return OTHER


def over_drivers(name: str) -> str:
    """How a metric each of several drivers reports becomes the run's (:attr:`MetricDef.over_drivers`)."""
    declared = METRICS.get(name)
    return declared.over_drivers if declared is not None else ""


def unit_of(name: str, reported: str | None = "") -> str:
    """The unit stored with a metric: the registry's; a workload's own metric keeps what it reported."""
    declared = METRICS.get(name)
    return declared.unit if declared is not None else (reported or "")


def is_rate(unit: str) -> bool:
    return unit.endswith("/s")

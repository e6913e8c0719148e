"""The metric registry: every metric cmx computes, declared once (as Celery's settings table does).

Ingest (the unit stored), summary, compare, report and the views read this table for a metric's
unit, its label, which direction is better and its family; adding a metric is one entry here plus
its computation (a row of ``sql/metrics.sql``, or a workload's ``ctx.metric``). Workloads name
which of these are their headline (``Workload.headline_metrics``); a user's workload class may
report metrics of its own, which :func:`get` describes from their names.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Better(str, enum.Enum):
    HIGHER = "higher"
    LOWER = "lower"
    NEITHER = "neither"  # a count or a fact: reported, never judged


@dataclass(frozen=True)
class MetricDef:
    name: str
    unit: str  # tasks, tasks/s, s, bytes, connections, messages, share, flag
    better: Better
    label: str  # a short column title
    description: str = ""
    #: Metrics of one family (latency_p50_s, latency_p99_s…) are explained once in a table's
    #: caption: "<family>: <description after its first ' of '>".
    family: str = ""


_H, _L, _N = Better.HIGHER, Better.LOWER, Better.NEITHER
#: Process roles the sampler watches (``--watch ROLE=…``, ``--watch-port ROLE=…``).
PROCESS_ROLES = ("worker", "driver", "broker", "backend", "service")

METRICS: dict[str, MetricDef] = {m.name: m for m in (
    MetricDef("tasks_published", "tasks", _N, "published", "tasks the driver published"),
    MetricDef("tasks_completed", "tasks", _N, "completed", "distinct tasks that ran to an end"),
    MetricDef("tasks_lost", "tasks", _L, "lost",
              "published and never executed (NULL when a host's records were not collected: tasks_unseen)"),
    MetricDef("tasks_unseen", "tasks", _L, "unseen",
              "published, not seen executing, and a host's records were not collected: they may have run"),
    MetricDef("tasks_duplicated", "tasks", _L, "duplicated", "executions beyond the first of a task"),
    MetricDef("tasks_redelivered", "tasks", _L, "redelivered", "deliveries flagged redelivered by the broker"),
    MetricDef("tasks_failed", "tasks", _L, "failed", "tasks that ended in a state other than SUCCESS"),
    # Fault runs (the fault dimension): measured from the first fault that struck.
    MetricDef("fault_at_s", "s", _N, "fault at",
              "when the first fault struck, seconds from the workload's clock start (the injecting host's clock, "
              "corrected)"),
    MetricDef("stall_s", "s", _L, "stall", "the longest time without a task finishing, from the fault on"),
    MetricDef("recovery_s", "s", _L, "recovery",
              "from the fault until tasks finish at 90 % of the pre-fault rate again (over a window of about ten "
              "pre-fault completions); NULL when they never do"),
    MetricDef("publish_rate", "tasks/s", _H, "publish", "tasks published per second (after warm-up)"),
    MetricDef("publish_batch", "messages", _N, "publish batch",
              "via raw: messages per round trip the server acknowledged (1: one call per message)"),
    MetricDef("consume_rate", "tasks/s", _H, "consume", "tasks finished per second (after warm-up)"),
    MetricDef("makespan_s", "s", _L, "makespan", "first task started to last task finished"),
    # Latency: finished minus the intended send time where the driver has one (stream mode), else
    # minus the send; queue wait and service time split it at the task's start. All on the
    # controller's clock (hosts' offsets applied; see engine/results/sql/task_times.sql).
    *(MetricDef(f"latency_p{p}_s", "s", _L, f"p{p} latency",
                f"p{p} of finished − intended send (stream) or − sent (backlog): what a caller waits", "latency")
      for p in (50, 95, 99)),
    *(MetricDef(f"queue_wait_p{p}_s", "s", _L, f"p{p} queue wait",
                f"p{p} of started − intended send (stream) or − sent (backlog)", "queue wait") for p in (50, 95, 99)),
    *(MetricDef(f"service_time_p{p}_s", "s", _L, f"p{p} service", f"p{p} of finished − started", "service time")
      for p in (50, 95, 99)),
    MetricDef("clock_uncertainty_s", "s", _L, "clock ±",
              "worst sum of the two hosts' clock-offset uncertainties over tasks run off their publisher's host"),
    MetricDef("clock_uncorrected_tasks", "tasks", _L, "unclocked",
              "tasks run off their publisher's host where a host's clock offset is unknown"),
    MetricDef("clock_suspect", "flag", _L, "clock suspect",
              "1 when clocks could move latency by over a tenth of its median (or an offset is unknown)"),
    MetricDef("send_lag_p99_s", "s", _L, "p99 send lag", "p99 of sent − intended send (stream): the driver's lag"),
    MetricDef("publish_behind", "tasks", _L, "behind",
              "stream: publishes the driver made later than their intended send time"),
    MetricDef("peak_pss_bytes", "bytes", _L, "peak PSS",
              "peak over ticks inside the run (clock start to drain) of the worker processes' summed PSS (shared "
              "pages split): the headline memory; NULL when no reading fell inside the run (not sampled)"),
    MetricDef("peak_rss_bytes", "bytes", _L, "peak RSS",
              "peak over ticks of the worker processes' summed RSS (counts shared pages in every process)"),
    MetricDef("peak_pss_per_slot_bytes", "bytes", _L, "PSS per slot",
              "pre-forking pools: most PSS per child process (children's sum over their number) at a tick"),
    MetricDef("peak_rss_per_slot_bytes", "bytes", _L, "RSS per slot",
              "pre-forking pools: most RSS per child process (children's sum over their number) at a tick"),
    MetricDef("worker_vmhwm_max_bytes", "bytes", _L, "max VmHWM", "most VmHWM (the kernel's peak RSS) of a worker process"),
    # Per process role (the sampler's --watch roles; a worker counts its children): the peak over
    # ticks of the role's summed processes, added over hosts.
    *(MetricDef(f"peak_{kind}_bytes_{role}", "bytes", _L, f"{role} peak {kind.upper()}",
                f"peak over ticks of the {role} processes' summed {kind.upper()}, added over hosts")
      for role in PROCESS_ROLES for kind in ("pss", "rss")),
    MetricDef("raw_driver_maxrss_bytes", "bytes", _L, "raw driver RSS",
              "via raw: the driver's own peak RSS (its raw consumers' memory is the driver's)"),
    MetricDef("sampler_cpu_percent", "%", _L, "sampler CPU",
              "the samplers' own CPU in % of one core (most over hosts): the cost of measuring"),
    MetricDef("heartbeat_negotiated_s", "s", _N, "heartbeat",
              "the broker heartbeat the workers' connections negotiated (lowest over workers)"),
    MetricDef("broker_connections_max", "connections", _L, "broker conns",
              "most connections of the run's own clients to the broker at once"),
    MetricDef("backend_connections_max", "connections", _L, "backend conns",
              "most connections of the run's own clients to the result backend at once"),
    *(MetricDef(f"{target}_connections_{client}_max", "connections", _L, f"{target} conns ({client})",
                f"most connections of the run's {client} processes to the {target} at once")
      for target in ("broker", "backend") for client in ("worker", "driver")),
    MetricDef("short_latency_p50_s", "s", _L, "short p50", "p50 latency of the mixed workload's short tasks"),
    MetricDef("short_latency_p99_s", "s", _L, "short p99", "p99 latency of the mixed workload's short tasks"),
    MetricDef("short_delayed_share", "share", _L, "shorts delayed",
              "share of short tasks that took over half a long task: they waited behind one"),
    MetricDef("chord_callback_s", "s", _L, "to callback", "chord sent to its callback's result (median)"),
    MetricDef("chord_callback_per_task_s", "s", _L, "per header task", "chord_callback_s over the header size"),
    MetricDef("backend_commands_approx", "commands", _N, "backend cmds ~",
              "backend Redis commands per chord, server-wide (an upper bound)"),
    MetricDef("queue_depth_max", "messages", _N, "max queue depth", "deepest the run's queue was at a probe"),
    # io_chord (workloads/catalog/io_chord.py)
    MetricDef("chords_makespan_s", "s", _L, "chords makespan", "first header task started to last finished"),
    MetricDef("header_tasks", "tasks", _N, "header tasks", "header tasks the chords' callbacks counted"),
    MetricDef("service_slept_s", "s", _N, "service slept", "seconds the slow service slept, summed over calls"),
    MetricDef("service_requests", "requests", _N, "service requests", "requests the slow service answered"),
    MetricDef("service_distinct_ids", "requests", _N, "distinct requests",
              "distinct header task ids among the service's requests"),
    # sql_fanout (workloads/catalog/sql_fanout.py): a web request = a group of SQL queries
    *(MetricDef(f"request_p{p}_s", "s", _L, f"p{p} request", f"p{p} of a web request's time, sent to all rows back")
      for p in (50, 95, 99)),
    MetricDef("request_mean_s", "s", _L, "mean request", "mean of a web request's time"),
    MetricDef("requests_per_s", "requests/s", _H, "requests", "web requests answered per second (after warm-up)"),
    MetricDef("results_correct", "", _N, "correct", "1 when the first request's rows equal a direct query's"),
    MetricDef("result_rows", "rows", _N, "rows", "rows one web request returns"),
    # ramp search runs (workloads/drive/ramp.py): what the judge rebuilds the steps from
    MetricDef("ramp_steps_run", "steps", _N, "ramp steps", "steps the ramp ran before it stopped"),
    MetricDef("ramp_start_rate", "tasks/s", _N, "ramp start", "the ramp's first step rate"),
    MetricDef("ramp_factor", "", _N, "ramp factor", "each step's rate over the one before"),
    MetricDef("ramp_step_s", "s", _N, "ramp step", "seconds per ramp step"),
    MetricDef("host_share_min", "share", _H, "min host share",
              "the smallest worker host's share of completed tasks (machines > 1; 1/machines is even)"),
    MetricDef("max_sustainable_rate", "tasks/s", _H, "max sustainable",
              "a search run's highest ramp step that kept up (engine/plan/ratesearch.py)"),
    MetricDef("target_rate", "tasks/s", _N, "target rate", "a rate_fraction run's rate: fraction × max sustainable"),
    MetricDef("drained_rate", "tasks/s", _H, "drained",
              "throughput backlog: tasks / (consuming started to all done by the workers' own counts, "
              "polled every 0.2 s); needs no per-task stamps"),
    MetricDef("harness_overhead_s", "s", _L, "harness",
              "run wall time (start to stored) minus the time tasks were in flight (first sent to last finished)"),
)}


#: The metric columns of the view ``run_summary``, in order (analysis/sql/run_summary.sql is
#: generated from this: ``python -m cmx.analysis.views``).
RUN_SUMMARY_COLUMNS = ("tasks_published", "tasks_completed", "tasks_lost", "tasks_duplicated", "publish_rate",
                       "consume_rate", "makespan_s", "latency_p50_s", "latency_p95_s", "latency_p99_s",
                       "peak_rss_bytes", "peak_pss_bytes", "broker_connections_max", "backend_connections_max")
#: What a fault cell's summary leads with (beside lost, its own column): what the fault did to delivery.
FAULT_HEADLINE = ("tasks_duplicated", "tasks_redelivered", "tasks_failed", "stall_s", "recovery_s")
#: Facts any workload's runs may carry: the report's summary table shows them beside the
#: workload's headline metrics when some run has them.
FACTS = ("host_share_min", "clock_suspect")


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


def unit_of(name: str, reported: str | None = "") -> str:
    """The unit stored with a metric: the registry's; a workload's own metric keeps what it reported."""
    declared = METRICS.get(name)
    return declared.unit if declared is not None else (reported or "")


def is_rate(unit: str) -> bool:
    return unit.endswith("/s")

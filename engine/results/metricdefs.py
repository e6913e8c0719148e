"""The metric registry: every metric cmx computes, declared once (as Celery's settings table does).

Summary, compare, report and views read this table for a metric's unit, its label and which
direction is better; adding a metric is one entry here plus its computation (``sql/metrics.sql``
or a workload's ``ctx.metric``).
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


_H, _L, _N = Better.HIGHER, Better.LOWER, Better.NEITHER

METRICS: dict[str, MetricDef] = {m.name: m for m in (
    MetricDef("tasks_published", "tasks", _N, "published", "tasks the driver published"),
    MetricDef("tasks_completed", "tasks", _N, "completed", "distinct tasks that ran to an end"),
    MetricDef("tasks_lost", "tasks", _L, "lost", "published and never executed"),
    MetricDef("tasks_duplicated", "tasks", _L, "duplicated", "executions beyond the first of a task"),
    MetricDef("tasks_redelivered", "tasks", _L, "redelivered", "deliveries flagged redelivered by the broker"),
    MetricDef("tasks_failed", "tasks", _L, "failed", "tasks that ended in a state other than SUCCESS"),
    MetricDef("publish_rate", "tasks/s", _H, "publish", "tasks published per second (after warm-up)"),
    MetricDef("publish_batch", "messages", _N, "publish batch",
              "via raw: messages per round trip the server acknowledged (1: one call per message)"),
    MetricDef("consume_rate", "tasks/s", _H, "consume", "tasks finished per second (after warm-up)"),
    MetricDef("makespan_s", "s", _L, "makespan", "first task started to last task finished"),
    # Latency: finished minus the intended send time where the driver has one (stream mode), else
    # minus the send; queue wait and service time split it at the task's start. All on the
    # controller's clock (hosts' offsets applied; see analysis/sql/task_times.sql).
    *(MetricDef(f"latency_p{p}_s", "s", _L, f"p{p} latency",
                f"p{p} of finished − intended send (stream) or − sent (backlog): what a caller waits")
      for p in (50, 95, 99)),
    *(MetricDef(f"queue_wait_p{p}_s", "s", _L, f"p{p} queue wait",
                f"p{p} of started − intended send (stream) or − sent (backlog)") for p in (50, 95, 99)),
    *(MetricDef(f"service_time_p{p}_s", "s", _L, f"p{p} service", f"p{p} of finished − started")
      for p in (50, 95, 99)),
    MetricDef("clock_uncertainty_s", "s", _L, "clock ±",
              "worst sum of the two hosts' clock-offset uncertainties over tasks run off their publisher's host"),
    MetricDef("clock_uncorrected_tasks", "tasks", _L, "unclocked",
              "tasks run off their publisher's host where a host's clock offset is unknown"),
    MetricDef("clock_suspect", "flag", _L, "clock suspect",
              "1 when clocks could move latency by over a tenth of its median (or an offset is unknown)"),
    MetricDef("send_lag_p99_s", "s", _L, "p99 send lag"),
    MetricDef("peak_pss_bytes", "bytes", _L, "peak PSS",
              "peak over ticks of the worker processes' summed PSS (shared pages split): the headline memory"),
    MetricDef("peak_rss_bytes", "bytes", _L, "peak RSS",
              "peak over ticks of the worker processes' summed RSS (counts shared pages in every process)"),
    MetricDef("peak_pss_per_slot_bytes", "bytes", _L, "PSS per slot",
              "pre-forking pools: most PSS per child process (children's sum over their number) at a tick"),
    MetricDef("peak_rss_per_slot_bytes", "bytes", _L, "RSS per slot",
              "pre-forking pools: most RSS per child process (children's sum over their number) at a tick"),
    MetricDef("worker_vmhwm_max_bytes", "bytes", _L, "max VmHWM"),
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
    MetricDef("queue_depth_max", "messages", _N, "max queue depth"),
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


def get(name: str) -> MetricDef:
    """The metric's definition; a metric not declared here (a workload's own) is unjudged."""
    return METRICS.get(name) or MetricDef(name, "", Better.NEITHER, name.replace("_", " "))

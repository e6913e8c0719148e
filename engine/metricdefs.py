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
    unit: str  # tasks, tasks/s, s, bytes, connections, messages, share
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
    MetricDef("consume_rate", "tasks/s", _H, "consume", "tasks finished per second (after warm-up)"),
    MetricDef("makespan_s", "s", _L, "makespan", "first task started to last task finished"),
    MetricDef("latency_p50_s", "s", _L, "p50 latency"),
    MetricDef("latency_p95_s", "s", _L, "p95 latency"),
    MetricDef("latency_p99_s", "s", _L, "p99 latency"),
    MetricDef("queue_wait_p50_s", "s", _L, "p50 queue wait"),
    MetricDef("send_lag_p99_s", "s", _L, "p99 send lag"),
    MetricDef("peak_rss_bytes", "bytes", _L, "peak RSS"),
    MetricDef("peak_pss_bytes", "bytes", _L, "peak PSS"),
    MetricDef("worker_vmhwm_max_bytes", "bytes", _L, "max VmHWM"),
    MetricDef("broker_connections_max", "connections", _L, "broker conns"),
    MetricDef("backend_connections_max", "connections", _L, "backend conns"),
    MetricDef("short_latency_p50_s", "s", _L, "short p50", "p50 latency of the mixed workload's short tasks"),
    MetricDef("short_latency_p99_s", "s", _L, "short p99", "p99 latency of the mixed workload's short tasks"),
    MetricDef("short_delayed_share", "share", _L, "shorts delayed",
              "share of short tasks that took over half a long task: they waited behind one"),
    MetricDef("chord_callback_s", "s", _L, "to callback", "chord sent to its callback's result (median)"),
    MetricDef("chord_callback_per_task_s", "s", _L, "per header task", "chord_callback_s over the header size"),
    MetricDef("backend_commands_approx", "commands", _N, "backend cmds ~",
              "backend Redis commands per chord, server-wide (an upper bound)"),
    MetricDef("queue_depth_max", "messages", _N, "max queue depth"),
)}


def get(name: str) -> MetricDef:
    """The metric's definition; a metric not declared here (a workload's own) is unjudged."""
    return METRICS.get(name) or MetricDef(name, "", Better.NEITHER, name.replace("_", " "))

"""What a metric's definition holds (:class:`MetricDef`), which direction of it is better, and the
groups results are shown in. The table of every metric cmx computes is ``metricdefs.METRICS``."""

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
    #: A figure each driver reports of its own share when a run has several (the `drivers`
    #: dimension): "sum" = the run's value is the sum over its drivers (each driver's own is in
    #: ``driver_metrics``); "" = the leading driver's.
    over_drivers: str = ""
    #: The group a metric is shown in when it is not the user's headline (:func:`group_of`):
    #: ``harness`` (cmx's own cost and clocks) and ``noise`` (the host's load from outside the run)
    #: are shown apart and never alarm or gate; "" = an ordinary measure.
    group: str = ""


#: The groups of ``cmx trend`` (and the report's history): only headline metrics (the workload's
#: own, the experiment's objective and thresholds) alarm and gate; the others are shown.
HEADLINE, OTHER, HARNESS, NOISE = "headline", "other", "harness", "noise"
GROUPS = (HEADLINE, OTHER, HARNESS, NOISE)

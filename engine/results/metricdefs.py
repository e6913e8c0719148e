"""The metric registry: every metric cmx computes, declared once (as Celery's settings table does).

Ingest (the unit stored), summary, compare, report and the views read this table for a metric's
unit, its label, which direction is better and its family; adding a metric is one entry here plus
its computation (a row of ``sql/metrics.sql``, or a workload's ``ctx.metric``). Workloads name
which of these are their headline (``Workload.headline_metrics``); a user's workload class may
report metrics of its own, which :func:`get` describes from their names. The names themselves
are written once, in the vocabulary (workloads/vocab/metrics.py), which the workloads read too.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from cmx.workloads.vocab import metrics as M
from cmx.workloads.vocab.clients import CLIENTS, TARGETS


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

_H, _L, _N = Better.HIGHER, Better.LOWER, Better.NEITHER
#: Process roles the sampler watches (``--watch ROLE=…``, ``--watch-port ROLE=…``).
PROCESS_ROLES = M.PROCESS_ROLES

METRICS: dict[str, MetricDef] = {m.name: m for m in (
    MetricDef(M.TASKS_PUBLISHED, "tasks", _N, "published", "tasks the driver published"),
    MetricDef(M.TASKS_COMPLETED, "tasks", _N, "completed", "distinct tasks that ran to an end"),
    MetricDef(M.TASKS_LOST, "tasks", _L, "lost",
              "published and never executed by a run that ended ok, or by a run failed for exactly those tasks lost "
              "before the queue (its error says so) (NULL when a host's records were not collected: tasks_unseen; "
              "or when the run did not end ok otherwise: tasks_not_run)"),
    MetricDef(M.TASKS_NOT_RUN, "tasks", _N, "not run",
              "published and not executed by a run that did not end ok (interrupted, failed, timed out): it "
              "stopped before them, so they are not counted as lost (tasks_lost is NULL then)"),
    MetricDef(M.TASKS_UNSEEN, "tasks", _L, "unseen",
              "published, not seen executing, and a host's records were not collected: they may have run"),
    MetricDef(M.TASKS_DUPLICATED, "tasks", _L, "duplicated", "executions beyond the first of a task"),
    MetricDef(M.TASKS_REDELIVERED, "tasks", _L, "redelivered", "deliveries flagged redelivered by the broker"),
    MetricDef(M.TASKS_FAILED, "tasks", _L, "failed", "tasks that ended in a state other than SUCCESS"),
    # Fault runs (the fault dimension): measured from the first fault that struck.
    MetricDef(M.FAULT_AT_S, "s", _N, "fault at",
              "when the first fault struck, seconds from the workload's clock start (the injecting host's clock, "
              "corrected)"),
    MetricDef(M.STALL_S, "s", _L, "stall",
              "the longest time without a task finishing, from the fault on; while published tasks remain "
              "unfinished, the time from the last completion to the run's end counts too (the run's end: when "
              "the leading driver stopped waiting, its faults over and limits.settle without a completion, or "
              "the run's timeout; on the controller's clock, as the task stamps); NULL when tasks remain "
              "unfinished and the run's end is not known"),
    MetricDef(M.STALL_CENSORED, "flag", _L, "stall censored",
              "1 when the longest stall is the one that ran to the run's end with tasks unfinished: no completion "
              "ended it, so it lasted at least stall_s (and the run never recovered); 0 when a completion ended it"),
    MetricDef(M.RECOVERY_S, "s", _L, "recovery",
              "from the fault until tasks finish at 90 % of the pre-fault rate again after the stall (over a window "
              "of about ten pre-fault completions); NULL when they never do (shown as never), always so after a "
              "censored stall"),
    MetricDef(M.DETECT_S, "s", _L, "detect",
              "from the fault until a worker of the run first noticed its broker connection broken (its consumer "
              "logged \"Connection to broker lost\"; the worker host's clock, corrected); NULL when none did"),
    MetricDef(M.PUBLISH_RATE, "tasks/s", _H, "publish", "tasks published per second (after warm-up)"),
    MetricDef(M.PUBLISH_RATE_MIN_DRIVER, "tasks/s", _H, "slowest driver",
              "drivers > 1: the slowest driver host's publish rate (publish_rate is the whole run's)"),
    MetricDef(M.PUBLISH_BATCH, "messages", _N, "publish batch",
              "via raw: messages per round trip the server acknowledged (1: one call per message)"),
    MetricDef(M.CONSUME_RATE, "tasks/s", _H, "consume", "tasks finished per second (after warm-up)"),
    MetricDef(M.MAKESPAN_S, "s", _L, "makespan", "first task started to last task finished"),
    # Latency: finished minus the intended send time where the driver has one (stream mode), else
    # minus the send; queue wait and service time split it at the task's start. All on the
    # controller's clock (hosts' offsets applied; see engine/results/sql/task_times.sql).
    *(MetricDef(M.latency(p), "s", _L, f"p{p} latency",
                f"p{p} of finished − intended send (stream) or − sent (backlog): what a caller waits", "latency")
      for p in M.PERCENTILES),
    *(MetricDef(M.queue_wait(p), "s", _L, f"p{p} queue wait",
                f"p{p} of started − intended send (stream) or − sent (backlog)", "queue wait") for p in M.PERCENTILES),
    *(MetricDef(M.service_time(p), "s", _L, f"p{p} service", f"p{p} of finished − started", "service time")
      for p in M.PERCENTILES),
    MetricDef(M.CLOCK_UNCERTAINTY_S, "s", _L, "clock ±",
              "worst sum of the two hosts' clock-offset uncertainties over tasks run off their publisher's host",
              group=HARNESS),
    MetricDef(M.CLOCK_UNCORRECTED_TASKS, "tasks", _L, "unclocked",
              "tasks run off their publisher's host where a host's clock offset is unknown", group=HARNESS),
    MetricDef(M.CLOCK_SUSPECT, "flag", _L, "clock suspect",
              "1 when clocks could move latency by over a tenth of its median (or an offset is unknown)",
              group=HARNESS),
    MetricDef(M.SEND_LAG_P99_S, "s", _L, "p99 send lag", "p99 of sent − intended send (stream): the driver's lag"),
    MetricDef(M.PUBLISH_BEHIND, "tasks", _L, "behind",
              "stream: publishes the drivers made later than their intended send time", over_drivers="sum"),
    MetricDef(M.PEAK_PSS_BYTES, "bytes", _L, "peak PSS",
              "peak over ticks inside the run (clock start to drain) of the worker processes' summed PSS (shared "
              "pages split): the headline memory; NULL when no reading fell inside the run (not sampled)"),
    MetricDef(M.MEMORY_PER_TASK_BYTES, "bytes", _L, "memory per task",
              "concurrent_sleep: what one concurrent task costs, (peak_pss_bytes − the workers' idle PSS) / "
              "tasks_in_flight_max; idle PSS = the worker main processes' last PSS reading before the first task "
              "arrived (a prefork worker's children are slots a task costs), summed over hosts; NULL when either "
              "PSS was not sampled"),
    MetricDef(M.TASKS_IN_FLIGHT_MAX, "tasks", _N, "most in flight",
              "concurrent_sleep: the most tasks started and not yet finished at once (task stamps)"),
    MetricDef(M.PEAK_RSS_BYTES, "bytes", _L, "peak RSS",
              "peak over ticks of the worker processes' summed RSS (counts shared pages in every process)"),
    MetricDef(M.PEAK_PSS_PER_SLOT_BYTES, "bytes", _L, "PSS per slot",
              "pre-forking pools: most PSS per child process (children's sum over their number) at a tick"),
    MetricDef(M.PEAK_RSS_PER_SLOT_BYTES, "bytes", _L, "RSS per slot",
              "pre-forking pools: most RSS per child process (children's sum over their number) at a tick"),
    MetricDef(M.WORKER_VMHWM_MAX_BYTES, "bytes", _L, "max VmHWM",
              "most VmHWM (the kernel's peak RSS) of a worker process"),
    # Per process role (the sampler's --watch roles; a worker counts its children): the peak over
    # ticks of the role's summed processes, added over hosts.
    *(MetricDef(M.peak_of_role(kind, role), "bytes", _L, f"{role} peak {kind.upper()}",
                f"peak over ticks of the {role} processes' summed {kind.upper()}, added over hosts")
      for role in PROCESS_ROLES for kind in M.MEMORY_KINDS),
    MetricDef(M.RAW_DRIVER_MAXRSS_BYTES, "bytes", _L, "raw driver RSS",
              "via raw: the driver's own peak RSS (its raw consumers' memory is the driver's)"),
    MetricDef(M.SAMPLER_CPU_PERCENT, "%", _L, "sampler CPU",
              "the samplers' own CPU in % of one core (most over hosts): the cost of measuring", group=HARNESS),
    MetricDef(M.HEARTBEAT_NEGOTIATED_S, "s", _N, "heartbeat",
              "the broker heartbeat the workers' connections negotiated (lowest over workers)"),
    MetricDef(M.BROKER_CONNECTIONS_MAX, "connections", _L, "broker conns",
              "most connections of the run's own clients to the broker at once"),
    MetricDef(M.BACKEND_CONNECTIONS_MAX, "connections", _L, "backend conns",
              "most connections of the run's own clients to the result backend at once"),
    # The broker's memory by its own accounting (the sampler's probe: RabbitMQ's management API
    # /api/nodes mem_used, summed over a cluster's nodes; Redis INFO memory used_memory), not its
    # processes' RSS: a cluster's nodes are several processes, on several hosts.
    MetricDef(M.BROKER_MEMORY_PEAK_BYTES, "bytes", _L, "broker memory",
              "most memory the broker said it used at a probe tick during the run, by its own accounting (RabbitMQ: "
              "mem_used of /api/nodes, summed over a cluster's nodes; Redis: used_memory of INFO memory, a "
              "Sentinel set's master); the whole server's, other users' included; only ticks every node answered; "
              "NULL where the broker cannot say (RabbitMQ without its management API)"),
    MetricDef(M.BROKER_MEMORY_GROWTH_BYTES, "bytes", _L, "broker memory growth",
              "broker_memory_peak_bytes minus the broker's memory at the first probe tick (the run's start, before "
              "its first task): what the run added at most; NULL where the broker cannot say"),
    *(MetricDef(M.connections_of(target, client), "connections", _L, f"{target} conns ({client})",
                f"most connections of the run's {client} processes to the {target} at once")
      for target in TARGETS for client in CLIENTS),
    MetricDef(M.SHORT_LATENCY_P50_S, "s", _L, "short p50", "p50 latency of the mixed workload's short tasks"),
    MetricDef(M.SHORT_LATENCY_P99_S, "s", _L, "short p99", "p99 latency of the mixed workload's short tasks"),
    MetricDef(M.SHORT_DELAYED_SHARE, "share", _L, "shorts delayed",
              "share of short tasks that took over half a long task: they waited behind one"),
    MetricDef(M.CHORD_CALLBACK_S, "s", _L, "to callback", "chord sent to its callback's result (median)"),
    MetricDef(M.CHORD_CALLBACK_PER_TASK_S, "s", _L, "per header task", "chord_callback_s over the header size"),
    MetricDef(M.BACKEND_COMMANDS_APPROX, "commands", _N, "backend cmds ~",
              "backend Redis commands per chord, server-wide (an upper bound)"),
    MetricDef(M.QUEUE_DEPTH_MAX, "messages", _N, "max queue depth", "deepest the run's queue was at a probe"),
    # io_chord (workloads/catalog/io_chord.py)
    MetricDef(M.CHORDS_MAKESPAN_S, "s", _L, "chords makespan", "first header task started to last finished"),
    MetricDef(M.HEADER_TASKS, "tasks", _N, "header tasks", "header tasks the chords' callbacks counted"),
    MetricDef(M.SERVICE_SLEPT_S, "s", _N, "service slept", "seconds the slow service slept, summed over calls"),
    MetricDef(M.SERVICE_REQUESTS, "requests", _N, "service requests", "requests the slow service answered"),
    MetricDef(M.SERVICE_DISTINCT_IDS, "requests", _N, "distinct requests",
              "distinct header task ids among the service's requests"),
    # sql_fanout (workloads/catalog/sql_fanout.py): a web request = a group of SQL queries
    *(MetricDef(M.request(p), "s", _L, f"p{p} request", f"p{p} of a web request's time, sent to all rows back")
      for p in M.PERCENTILES),
    MetricDef(M.REQUEST_MEAN_S, "s", _L, "mean request", "mean of a web request's time"),
    MetricDef(M.REQUESTS_PER_S, "requests/s", _H, "requests", "web requests answered per second (after warm-up)"),
    MetricDef(M.RESULTS_CORRECT, "", _N, "correct", "1 when the first request's rows equal a direct query's"),
    MetricDef(M.RESULT_ROWS, "rows", _N, "rows", "rows one web request returns"),
    # ramp search runs (workloads/drive/ramp.py): what the judge rebuilds the steps from
    MetricDef(M.RAMP_STEPS_RUN, "steps", _N, "ramp steps", "steps the ramp ran before it stopped"),
    MetricDef(M.RAMP_START_RATE, "tasks/s", _N, "ramp start", "the ramp's first step rate"),
    MetricDef(M.RAMP_FACTOR, "", _N, "ramp factor", "each step's rate over the one before"),
    MetricDef(M.RAMP_STEP_S, "s", _N, "ramp step", "seconds per ramp step"),
    MetricDef(M.HOST_SHARE_MIN, "share", _H, "min host share",
              "the smallest worker host's share of completed tasks (machines > 1; 1/machines is even)"),
    MetricDef(M.MAX_SUSTAINABLE_RATE, "tasks/s", _H, "max sustainable",
              "a search run's highest ramp step that kept up (engine/plan/ratesearch.py)"),
    MetricDef(M.TARGET_RATE, "tasks/s", _N, "target rate", "a rate_fraction run's rate: fraction × max sustainable"),
    MetricDef(M.DRAINED_RATE, "tasks/s", _H, "drained",
              "throughput backlog: tasks / (consuming started to all done by the workers' own counts, "
              "polled every 0.2 s); needs no per-task stamps"),
    MetricDef(M.HARNESS_OVERHEAD_S, "s", _L, "harness",
              "run wall time (start to stored) minus the time tasks were in flight (first sent to last finished)",
              group=HARNESS),
    # The noise group: the host's load from outside the run over the run's window (worst host;
    # per host in ``host_noise``), read from /proc by the sampler (workloads/host/noise.py). Never
    # judged (a busier host is no worse configuration): analysis/noise.py says when it differs.
    MetricDef(M.NOISE_CPU_SHARE, "share", _N, "outside CPU",
              "CPU the host's processes outside the run used, as a share of its cores (busy CPU in /proc/stat "
              "minus the run's sampled processes'), over the run; most over hosts", group=NOISE),
    MetricDef(M.NOISE_STEAL_SHARE, "share", _N, "steal",
              "CPU time the hypervisor gave others (/proc/stat steal) as a share of the host's cores; most over hosts",
              group=NOISE),
    MetricDef(M.NOISE_LOAD1, "share", _N, "load per core",
              "mean 1-minute load average over the run divided by the host's cores; most over hosts", group=NOISE),
    MetricDef(M.NOISE_PSI_CPU_SOME_SHARE, "share", _N, "CPU pressure",
              "share of the run's wall time some task waited for a CPU (/proc/pressure/cpu some); most over hosts; "
              "absent where the kernel has no PSI", group=NOISE),
    MetricDef(M.NOISE_PSI_MEMORY_SOME_SHARE, "share", _N, "memory pressure",
              "share of the run's wall time some task stalled on memory (/proc/pressure/memory some); most over "
              "hosts; absent where the kernel has no PSI", group=NOISE),
)}


#: The metric columns of the view ``run_summary``, in order (analysis/sql/run_summary.sql is
#: generated from this: ``python -m cmx.analysis.views``).
RUN_SUMMARY_COLUMNS = (M.TASKS_PUBLISHED, M.TASKS_COMPLETED, M.TASKS_LOST, M.TASKS_DUPLICATED, M.PUBLISH_RATE,
                       M.CONSUME_RATE, M.MAKESPAN_S, M.LATENCY_P50_S, M.LATENCY_P95_S, M.LATENCY_P99_S,
                       M.PEAK_RSS_BYTES, M.PEAK_PSS_BYTES, M.BROKER_CONNECTIONS_MAX, M.BACKEND_CONNECTIONS_MAX)
#: What a fault cell's summary leads with (beside lost, its own column): what the fault did to delivery.
FAULT_HEADLINE = (M.TASKS_DUPLICATED, M.TASKS_REDELIVERED, M.TASKS_FAILED, M.STALL_S, M.STALL_CENSORED,
                  M.RECOVERY_S, M.DETECT_S)
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

"""Metric names: each written once, here. The controller's registry (engine/results/metricdefs.py)
gives them units, labels and directions; the workloads that report them (``ctx.metric``), ingest,
the analysis and the SQL files read the same names.

Families (one name per percentile, role or client) are built by the functions below.
"""

from __future__ import annotations

from .clients import CLIENTS, TARGETS

#: The percentiles of the latency, queue-wait, service-time and request families.
PERCENTILES = (50, 95, 99)
#: Process roles the sampler watches (``--watch ROLE=…``, ``--watch-port ROLE=…``).
PROCESS_ROLES = ("worker", "driver", "broker", "backend", "service")
#: Memory kinds of the per-role peaks.
MEMORY_KINDS = ("pss", "rss")


def latency(p: int) -> str:
    return f"latency_p{p}_s"


def queue_wait(p: int) -> str:
    return f"queue_wait_p{p}_s"


def service_time(p: int) -> str:
    return f"service_time_p{p}_s"


def request(p: int) -> str:
    return f"request_p{p}_s"


def peak_of_role(kind: str, role: str) -> str:
    return f"peak_{kind}_bytes_{role}"


def connections_of(target: str, client: str) -> str:
    return f"{target}_connections_{client}_max"


LATENCY_P50_S, LATENCY_P95_S, LATENCY_P99_S = (latency(p) for p in PERCENTILES)
ROLE_PEAKS = tuple(peak_of_role(kind, role) for role in PROCESS_ROLES for kind in MEMORY_KINDS)
CLIENT_CONNECTIONS = tuple(connections_of(t, c) for t in TARGETS for c in CLIENTS)

TASKS_PUBLISHED = "tasks_published"
TASKS_COMPLETED = "tasks_completed"
TASKS_LOST = "tasks_lost"
TASKS_UNSEEN = "tasks_unseen"
TASKS_NOT_RUN = "tasks_not_run"
TASKS_DUPLICATED = "tasks_duplicated"
TASKS_REDELIVERED = "tasks_redelivered"
TASKS_FAILED = "tasks_failed"
PUBLISH_RATE = "publish_rate"
PUBLISH_RATE_MIN_DRIVER = "publish_rate_min_driver"
PUBLISH_BATCH = "publish_batch"
CONSUME_RATE = "consume_rate"
MAKESPAN_S = "makespan_s"
CLOCK_UNCERTAINTY_S = "clock_uncertainty_s"
CLOCK_UNCORRECTED_TASKS = "clock_uncorrected_tasks"
CLOCK_SUSPECT = "clock_suspect"
SEND_LAG_P99_S = "send_lag_p99_s"
PUBLISH_BEHIND = "publish_behind"
PEAK_PSS_BYTES = "peak_pss_bytes"
PEAK_RSS_BYTES = "peak_rss_bytes"
PEAK_PSS_PER_SLOT_BYTES = "peak_pss_per_slot_bytes"
PEAK_RSS_PER_SLOT_BYTES = "peak_rss_per_slot_bytes"
WORKER_VMHWM_MAX_BYTES = "worker_vmhwm_max_bytes"
RAW_DRIVER_MAXRSS_BYTES = "raw_driver_maxrss_bytes"
SAMPLER_CPU_PERCENT = "sampler_cpu_percent"
HEARTBEAT_NEGOTIATED_S = "heartbeat_negotiated_s"
BROKER_CONNECTIONS_MAX = "broker_connections_max"
BACKEND_CONNECTIONS_MAX = "backend_connections_max"
BROKER_MEMORY_PEAK_BYTES = "broker_memory_peak_bytes"
BROKER_MEMORY_GROWTH_BYTES = "broker_memory_growth_bytes"
SHORT_LATENCY_P50_S = "short_latency_p50_s"
SHORT_LATENCY_P99_S = "short_latency_p99_s"
SHORT_DELAYED_SHARE = "short_delayed_share"
CHORD_CALLBACK_S = "chord_callback_s"
CHORD_CALLBACK_PER_TASK_S = "chord_callback_per_task_s"
BACKEND_COMMANDS_APPROX = "backend_commands_approx"
QUEUE_DEPTH_MAX = "queue_depth_max"
WORKER_STARVED_SHARE = "worker_starved_share"
CHORDS_MAKESPAN_S = "chords_makespan_s"
HEADER_TASKS = "header_tasks"
SERVICE_SLEPT_S = "service_slept_s"
SERVICE_REQUESTS = "service_requests"
SERVICE_DISTINCT_IDS = "service_distinct_ids"
REQUEST_MEAN_S = "request_mean_s"
REQUESTS_PER_S = "requests_per_s"
RESULTS_CORRECT = "results_correct"
RESULT_ROWS = "result_rows"
RAMP_STEPS_RUN = "ramp_steps_run"
RAMP_START_RATE = "ramp_start_rate"
RAMP_FACTOR = "ramp_factor"
RAMP_STEP_S = "ramp_step_s"
HOST_SHARE_MIN = "host_share_min"
MAX_SUSTAINABLE_RATE = "max_sustainable_rate"
TARGET_RATE = "target_rate"
DRAINED_RATE = "drained_rate"
HARNESS_OVERHEAD_S = "harness_overhead_s"
FAULT_AT_S = "fault_at_s"
STALL_S = "stall_s"
STALL_CENSORED = "stall_censored"
RECOVERY_S = "recovery_s"
DETECT_S = "detect_s"
MEMORY_PER_TASK_BYTES = "memory_per_task_bytes"
TASKS_IN_FLIGHT_MAX = "tasks_in_flight_max"
# The noise group (workloads/host/noise.py, engine/results/ingest_noise.py): what the host did
# outside the run while it ran; it labels a change, never gates one.
NOISE_CPU_SHARE = "noise_cpu_share"
NOISE_STEAL_SHARE = "noise_steal_share"
NOISE_LOAD1 = "noise_load1"
NOISE_PSI_CPU_SOME_SHARE = "noise_psi_cpu_some_share"
NOISE_PSI_MEMORY_SOME_SHARE = "noise_psi_memory_some_share"
NOISE_METRICS = (NOISE_CPU_SHARE, NOISE_STEAL_SHARE, NOISE_LOAD1, NOISE_PSI_CPU_SOME_SHARE, NOISE_PSI_MEMORY_SOME_SHARE)

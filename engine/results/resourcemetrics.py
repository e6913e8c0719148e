"""The metrics of what a run's processes cost their hosts: memory (the sampler's ticks of PSS, RSS
and VmHWM, per process role), the sampler's own CPU, and connections to the broker and the result
backend (and the heartbeat they negotiated). Part of the registry ``metricdefs.METRICS``, in its order."""

from __future__ import annotations

from cmx.engine.results.metrictypes import HARNESS, Better, MetricDef
from cmx.workloads.vocab import metrics as M
from cmx.workloads.vocab.clients import CLIENTS, TARGETS

_L, _N = Better.LOWER, Better.NEITHER
#: Process roles the sampler watches (``--watch ROLE=…``, ``--watch-port ROLE=…``).
PROCESS_ROLES = M.PROCESS_ROLES

RESOURCE_METRICS: tuple[MetricDef, ...] = (
    MetricDef(
        M.PEAK_PSS_BYTES,
        "bytes",
        _L,
        "peak PSS",
        "peak over ticks inside the run (clock start to drain) of the worker processes' summed PSS (shared "
        "pages split): the headline memory; NULL when no reading fell inside the run (not sampled)",
    ),
    MetricDef(
        M.MEMORY_PER_TASK_BYTES,
        "bytes",
        _L,
        "memory per task",
        "concurrent_sleep: what one concurrent task costs, (peak_pss_bytes − the workers' idle PSS) / "
        "tasks_in_flight_max; idle PSS = the worker main processes' last PSS reading before the first task "
        "arrived (a prefork worker's children are slots a task costs), summed over hosts; NULL when either "
        "PSS was not sampled",
    ),
    MetricDef(
        M.TASKS_IN_FLIGHT_MAX,
        "tasks",
        _N,
        "most in flight",
        "concurrent_sleep: the most tasks started and not yet finished at once (task stamps)",
    ),
    MetricDef(
        M.PEAK_RSS_BYTES,
        "bytes",
        _L,
        "peak RSS",
        "peak over ticks of the worker processes' summed RSS (counts shared pages in every process)",
    ),
    MetricDef(
        M.PEAK_PSS_PER_SLOT_BYTES,
        "bytes",
        _L,
        "PSS per slot",
        "pre-forking pools: most PSS per child process (children's sum over their number) at a tick",
    ),
    MetricDef(
        M.PEAK_RSS_PER_SLOT_BYTES,
        "bytes",
        _L,
        "RSS per slot",
        "pre-forking pools: most RSS per child process (children's sum over their number) at a tick",
    ),
    MetricDef(
        M.WORKER_VMHWM_MAX_BYTES, "bytes", _L, "max VmHWM", "most VmHWM (the kernel's peak RSS) of a worker process"
    ),
    # Per process role (the sampler's --watch roles; a worker counts its children): the peak over
    # ticks of the role's summed processes, added over hosts.
    *(
        MetricDef(
            M.peak_of_role(kind, role),
            "bytes",
            _L,
            f"{role} peak {kind.upper()}",
            f"peak over ticks of the {role} processes' summed {kind.upper()}, added over hosts",
        )
        for role in PROCESS_ROLES
        for kind in M.MEMORY_KINDS
    ),
    MetricDef(
        M.RAW_DRIVER_MAXRSS_BYTES,
        "bytes",
        _L,
        "raw driver RSS",
        "via raw: the driver's own peak RSS (its raw consumers' memory is the driver's)",
    ),
    MetricDef(
        M.SAMPLER_CPU_PERCENT,
        "%",
        _L,
        "sampler CPU",
        "the samplers' own CPU in % of one core (most over hosts): the cost of measuring",
        group=HARNESS,
    ),
    MetricDef(
        M.HEARTBEAT_NEGOTIATED_S,
        "s",
        _N,
        "heartbeat",
        "the broker heartbeat the workers' connections negotiated (lowest over workers)",
    ),
    MetricDef(
        M.BROKER_CONNECTIONS_MAX,
        "connections",
        _L,
        "broker conns",
        "most connections of the run's own clients to the broker at once",
    ),
    MetricDef(
        M.BACKEND_CONNECTIONS_MAX,
        "connections",
        _L,
        "backend conns",
        "most connections of the run's own clients to the result backend at once",
    ),
    # The broker's memory by its own accounting (the sampler's probe: RabbitMQ's management API
    # /api/nodes mem_used, summed over a cluster's nodes; Redis INFO memory used_memory), not its
    # processes' RSS: a cluster's nodes are several processes, on several hosts.
    MetricDef(
        M.BROKER_MEMORY_PEAK_BYTES,
        "bytes",
        _L,
        "broker memory",
        "most memory the broker said it used at a probe tick during the run, by its own accounting (RabbitMQ: "
        "mem_used of /api/nodes, summed over a cluster's nodes; Redis: used_memory of INFO memory, a "
        "Sentinel set's master); the whole server's, other users' included; only ticks every node answered; "
        "NULL where the broker cannot say (RabbitMQ without its management API)",
    ),
    MetricDef(
        M.BROKER_MEMORY_GROWTH_BYTES,
        "bytes",
        _L,
        "broker memory growth",
        "broker_memory_peak_bytes minus the broker's memory at the first probe tick (the run's start, before "
        "its first task): what the run added at most; NULL where the broker cannot say",
    ),
    *(
        MetricDef(
            M.connections_of(target, client),
            "connections",
            _L,
            f"{target} conns ({client})",
            f"most connections of the run's {client} processes to the {target} at once",
        )
        for target in TARGETS
        for client in CLIENTS
    ),
)

"""Which hosts do what in one run: its workers, its drivers, every host it touches, and what each
host's sampler watches there (the run's pids, the ports of a broker or backend on that host).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from cmx.engine.hosts.connection import LOOPBACK
from cmx.engine.hosts.inventory import Inventory
from cmx.workloads.vocab import kinds
from cmx.workloads.catalog import registry
from cmx.workloads.servers import registry as servers


@dataclass
class RunTargets:
    """Which hosts do what in one run."""

    workers: tuple[str, ...]
    driver: str  # the leading driver (the first of ``drivers``)
    drivers: tuple[str, ...]
    hosts: tuple[str, ...]
    sampler_args: dict[str, str]


def run_targets(inventory: Inventory, workload_name: str, vals: dict) -> RunTargets:
    """The run's workers (the first ``machines`` of group workers), drivers (the first ``drivers``
    of group drivers), every host it touches and what each host's sampler watches."""
    workers = inventory.workers_for(vals["machines"])
    drivers = inventory.drivers_for(vals.get("drivers", 1))
    driver = drivers[0]
    hosts = list(dict.fromkeys([*workers, *drivers]))
    args: dict[str, list[str]] = {
        h: [
            "--watch worker={run_dir}/worker.pid",  # the host's run dir
            "--watch driver={run_dir}/driver.pid",
        ]
        for h in hosts
    }
    broker_host = inventory.hosts_of("brokers")[0]
    port = local_port(inventory, broker_host, inventory.broker_url(vals["broker"]))
    if port and not servers.service_of("broker", vals["broker"]).spread:  # a set's URL names sentinels, not its master
        args.setdefault(broker_host, []).append(f"--watch-port broker={port}")
    args[driver] += [f"--connections broker={kinds.BROKERS[vals['broker']].service}", "--keep-expiring"]
    backend_service = kinds.BACKENDS[vals["backend"]].service
    if backend_service:
        backend_host = inventory.hosts_of("backends")[0]
        port = local_port(inventory, backend_host, inventory.backend_url(vals["backend"]))
        if port:
            args.setdefault(backend_host, []).append(f"--watch-port backend={port}")
        args[driver].append(f"--connections backend={backend_service}")
    workload = registry.get(workload_name)
    if workload.service_module:
        service_host = inventory.service_host()
        args.setdefault(service_host, []).append("--watch service={run_dir}/service.pid")
    for host in struck_node_hosts(inventory, vals):  # its agent strikes the node there
        args.setdefault(host, [])
    hosts = list(dict.fromkeys([*hosts, *args]))
    return RunTargets(
        workers=workers,
        driver=driver,
        drivers=drivers,
        hosts=tuple(hosts),
        sampler_args={h: " ".join(a) for h, a in args.items()},
    )


def struck_node_hosts(inventory: Inventory, vals: dict) -> list[str]:
    """The hosts of the broker nodes the run's faults strike (``kill_broker_node:N``): a node on a
    brokers host that neither works nor drives (one node per brokers host) needs that host's agent."""
    from cmx.engine.run.faultrun import broker_place
    from cmx.workloads.faults import parse

    picks = [
        int(f.host) for f in parse(vals.get("fault") or "none") if f.target != "worker" and f.definition.takes_target
    ]
    nodes = (broker_place(inventory, vals["broker"]).get("nodes") or []) if picks else []
    return [nodes[n - 1]["host"] for n in picks if 1 <= n <= len(nodes)]


def local_port(inventory: Inventory, host: str, url: str | None) -> int | None:
    """The service's port when it runs on ``host`` itself (so its process can be sampled)."""
    if not url:
        return None
    parts = urlsplit(url.removeprefix("db+"))
    if parts.hostname in (*LOOPBACK, "") or parts.hostname in (host, inventory.address(host)):
        return parts.port or servers.default_port(parts.scheme)
    return None

"""What one run's hosts are given: its :class:`RunSpec` (the cell's values, the experiment's limits,
where its workers and drivers run), its secrets (the broker's, backend's and database's URLs and
the servers' own: on the agent's stdin, never in argv or a file), and each host's ``begin`` payload
(engine/run/runsteps.py)."""

from __future__ import annotations

from cmx.engine.hosts.inventory import Inventory
from cmx.engine.model.experiment import Experiment
from cmx.engine.plan.planner import Run
from cmx.engine.hosts.provision import version_set_key
from cmx.engine.run.targets import RunTargets
from cmx.workloads.catalog import registry
from cmx.workloads.servers import registry as servers
from cmx.workloads.vocab.dimensions import ON_HOSTS, package_versions
from cmx.workloads.runtime.spec import QUEUE_EXPIRY_MARGIN_S, RunSpec, node_name


def run_spec(
    exp: Experiment,
    inventory: Inventory,
    run: Run,
    targets: RunTargets,
    conns: dict,
    environments: dict[str, str],
    rate: float | None = None,
) -> RunSpec:
    """The run's spec; ``rate``: a rate_fraction run's target rate (a fraction of its cell's maximum
    sustainable rate); ``environments``: version set key -> the host environment provisioning built."""
    from cmx.engine.model.user_code import workload_queues

    vals = run.cell.values
    params = {k.removeprefix("params."): v for k, v in vals.items() if k.startswith("params.")}
    if rate is not None:
        params["rate"] = rate
    return RunSpec(
        run_id=run.run_id,
        experiment=run.experiment,
        cell_id=run.cell.cell_id,
        repeat=run.repeat,
        workload=exp.workload.name,
        params=params,
        **{d.name: vals[d.name] for d in ON_HOSTS},  # broker, pool...: workloads/vocab/dimensions.py
        celery={k.removeprefix("celery."): v for k, v in vals.items() if k.startswith("celery.")},
        worker_flags={k.removeprefix("worker."): v for k, v in vals.items() if k.startswith("worker.")},
        packages=(versions := package_versions(vals)),
        python_env=environments[version_set_key(versions)] if versions else None,
        worker_nodes=[node_name(run.run_id, h) for h in targets.workers],
        driver_hosts=list(targets.drivers),
        warmup_s=exp.limits.warmup,
        run_timeout_s=exp.limits.run_timeout,
        # The driver waits for workers to answer and consume as long as one may take to start.
        worker_start_timeout_s=max(conns[h].worker_ready_timeout for h in targets.workers),
        service_url=service_url(exp, inventory),
        queue_expires_s=exp.limits.run_timeout + exp.limits.warmup + QUEUE_EXPIRY_MARGIN_S,
        settle_s=exp.limits.settle,
        fault_restart_s=exp.limits.fault_restart,
        extra_queues=workload_queues(exp, params),
    )


def service_url(exp: Experiment, inventory: Inventory) -> str | None:
    """Where the workload's own service (io_chord's slow service) listens, if it has one."""
    if not registry.get(exp.workload.name).service_module:
        return None
    host = inventory.service_host()
    port = int(inventory.hostvars.get(host, {}).get("cmx_service_port", 8765))
    return f"http://{inventory.address(host)}:{port}"


def run_secrets(exp: Experiment, inventory: Inventory, run: Run) -> dict[str, str]:
    """The run's URLs and the servers' secrets, as the hosts' environment variables."""
    vals = run.cell.values
    database = inventory.database_url() if registry.get(exp.workload.name).needs_database else None
    # Every server's own secrets are set (empty unless the run's broker is that server: its hook).
    own = {name: "" for server in servers.SERVERS.values() for name in server.secret_names}
    return {
        "CMX_BROKER_URL": inventory.broker_url(vals["broker"]),
        "CMX_BACKEND_URL": inventory.backend_url(vals["backend"]) or "",
        **own,
        **servers.service_of("broker", vals["broker"]).secrets(inventory),
        "CMX_DATABASE_URL": database or "",
    }


def begin_payloads(
    exp: Experiment, inventory: Inventory, run: Run, targets: RunTargets, spec: RunSpec, conns: dict
) -> dict[str, dict]:
    """What ``begin`` gets on each host (on the agent's stdin: it holds the secrets)."""
    secrets = run_secrets(exp, inventory, run)
    service = registry.get(exp.workload.name).service_module
    service_host = inventory.service_host() if service else None
    return {
        h: {
            "spec": spec.model_dump(mode="json"),
            "secrets": secrets,
            "sampler_args": targets.sampler_args.get(h, ""),
            "service": {"module": service, "port": int(spec.service_url.rsplit(":", 1)[1])}
            if h == service_host
            else None,
            "worker": {"ready_timeout": conns[h].worker_ready_timeout} if h in targets.workers else None,
            "driver": h in targets.drivers,
        }
        for h in targets.hosts
    }

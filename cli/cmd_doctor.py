"""``cmx doctor`` (can a sweep run here?) and ``cmx services up`` (start this machine's services)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from cmx.cli.common import INVENTORY_OPTION, app, err, fail
from cmx.engine.errors import HostError, InputError, Problem

services_app = typer.Typer(no_args_is_help=True, help="The services of sweeps on this machine (the local inventory).")
app.add_typer(services_app, name="services")


def _needs(exp, cells, inv):
    """What the experiment's cells use: their broker and backend kinds, the workload's database,
    and the hosts a sweep of them runs on (workers, driver, services host, and the broker and
    backend hosts where the sweep starts a server or watches one on loopback)."""
    from urllib.parse import urlsplit

    from cmx.engine.hosts.connection import LOOPBACK
    from cmx.engine.hosts.doctor import Needs
    from cmx.engine.hosts.inventory import SERVED_BY
    from cmx.workloads.catalog import registry

    brokers = frozenset(c.values["broker"] for c in cells)
    backends = frozenset(c.values["backend"] for c in cells)
    workload = registry.get(exp.workload.name)
    hosts = [
        *inv.workers_for(max(c.values["machines"] for c in cells)),
        *inv.drivers_for(max(c.values.get("drivers", 1) for c in cells)),
    ]
    if workload.service_module or workload.needs_database:
        hosts += inv.hosts_of("services")[:1]
    hosts += [h for hs in inv.services_to_provision(set(brokers), set(backends)).values() for h in hs]
    for target, used in (("broker", brokers), ("backend", backends)):
        group, var = SERVED_BY[target]
        for name in used:
            url = inv.kind_url(target, name) if inv.hosts_of(group) else None
            host = inv.hosts_of(group)[0] if url else None
            if host and urlsplit(url.removeprefix("db+")).hostname in (*LOOPBACK, host, inv.address(host)):
                hosts.append(host)  # its server's process is sampled there
    return Needs(brokers, backends, workload.needs_database, tuple(dict.fromkeys(hosts)))


def _unicode() -> bool:
    try:
        "✓✗".encode(sys.stdout.encoding or "ascii")
        return True
    except (UnicodeEncodeError, LookupError):
        return False


@app.command()
def doctor(
    file: Optional[Path] = typer.Argument(None, help="An experiment YAML file: check only what its cells need."),
    inventory: Optional[Path] = INVENTORY_OPTION,
):
    """Check every host and service a sweep needs, in parallel: one line each, with the fix.

    Hosts (through the sweep's own connection): SSH reach, the Python the hosts' venv is made from,
    become rights where the inventory asks them, free disk under the work dir, the clock against
    this machine's. Services: broker and backend URLs with their credentials (printed redacted),
    RabbitMQ's management API, the workload's PostgreSQL. With FILE only what its cells use;
    without, everything in the inventory. Where a service is this machine's, the fix names the
    commands that start it (`cmx services up`).

    Exit codes: 0 a sweep can run (lines marked ! are warnings), 1 a check failed, 2 bad input.
    """
    from cmx.engine.hosts import doctor as dr
    from cmx.engine.hosts.doctor_hosts import host_task
    from cmx.engine.hosts.connection import connections
    from cmx.engine.hosts.inventory import choose_inventory, load_inventory, uses_builtin
    from cmx.workloads.runtime.clock import ClockServer

    try:
        exp = cells = None
        if file is not None:
            from cmx.engine.model.cells import expand
            from cmx.engine.model.load import load_experiment

            if not file.is_file():
                raise InputError(Problem("no such experiment file", str(file)))
            exp = load_experiment(file)
            cells = expand(exp)
        path = choose_inventory(inventory, exp.inventory if exp else None, file or Path("."))
        if uses_builtin(inventory, exp.inventory if exp else None):
            err.print(f"using the built-in localhost inventory ({path})", markup=False, highlight=False)
        inv = load_inventory(path)
        needs = _needs(exp, cells, inv) if exp else dr.Needs()
        conns = connections(inv.path, dr.hosts_needed(inv, needs))
    except (InputError, HostError) as exc:
        fail(exc)
    secrets = dr.secrets_of(inv)
    unicode = _unicode()
    with ClockServer() as clock:
        tasks = [host_task(c, clock.port, str(inv.path)) for c in conns.values()]
        checks = dr.run_all(tasks + dr.service_tasks(inv, needs))
    for check in checks:
        print(dr.scrub(dr.line(check, unicode), secrets), flush=True)
    code = dr.exit_code(checks)
    failed = sum(c.state == dr.FAIL for c in checks)
    summary = (
        f"{inv.path}: a sweep can run"
        if code == 0
        else f"{inv.path}: {failed} check(s) failed: a sweep would not run (fix them, then `cmx doctor` again)"
    )
    print(summary + (f" ({exp.source})" if exp else ""))
    raise typer.Exit(code)


@services_app.command("up")
def services_up():
    """Start Redis, RabbitMQ and PostgreSQL on this machine where they do not answer.

    Redis on 127.0.0.1:6379, RabbitMQ on 5672 (guest/guest) with its management API on 15672,
    PostgreSQL on 5432 (trust): what the local inventory points at. Missing ones are installed
    from Debian's packages first (as root, or through sudo). `make services` runs this.

    Exit codes: 0 all answer, 1 one could not be started (the line names the command).
    """
    from cmx.engine.hosts import localservices

    try:
        started = localservices.up(lambda message: err.print(message, markup=False, highlight=False))
    except HostError as exc:
        err.print(f"services up: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    names = ", ".join(s.name for s in localservices.LOCAL)
    print(
        f"services up: started {', '.join(started)}; {names} answer on loopback"
        if started
        else f"services up: {names} already answer on loopback; nothing to start"
    )

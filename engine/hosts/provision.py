"""Provisioning, once per sweep: build what the hosts need on the controller, ship it, set up every host.

Hosts may reach no package index, so the controller downloads every wheel the hosts need (pinned
to its own versions), installs them once (engine/hosts/wheelhouse.py), and the ``python_env`` role
unpacks that environment on each host.
"""

from __future__ import annotations

import hashlib
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from dataclasses import dataclass, field
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from cmx.engine.hosts.ansible import PlaybookResult, run_playbook
from cmx.engine.hosts.connection import Connection
from cmx.engine.errors import HostError
from cmx.engine.hosts.inventory import Inventory
from cmx.engine.hosts.wheelhouse import host_needs, house_name, python_version, site_archive, workloads_archive
from cmx.engine.paths import HOST_REQUIREMENTS, user_cache
from cmx.workloads.servers import registry as servers

#: Wheelhouses and what is installed from them, by content, for every results folder: a new
#: one's first sweep downloads, installs and compiles nothing (~10 s).
WHEELHOUSES = user_cache("wheelhouse")


def host_requirements(extra: tuple[str, ...] = ()) -> list[str]:
    """``name==version`` for every host requirement, and each of ``extra`` (a workload's own:
    ``Workload.host_requirements``), at the controller's installed versions."""
    names = [line.split("#", 1)[0].strip() for line in HOST_REQUIREMENTS.read_text().splitlines()]
    pins = []
    for name in [n for n in names if n] + [n for n in extra if n not in names]:
        try:
            pins.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            pins.append(name)
    return pins


def environment_pins(pins: list[str], versions: dict[str, str]) -> list[str]:
    """The requirements of the environment of one ``package.*`` version set: each chosen package at
    its version (the one validation resolved: engine/model/packages.py); the packages a chosen one
    requires left for pip to fit to it (celery 5.5 takes a kombu 5.5); the rest as ``pins``."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from cmx.engine.model.packages import requires, resolve

    chosen, fitted = {}, set()
    for name, spec in versions.items():
        try:
            version_, wheel = resolve(name, spec)
        except ValueError as exc:
            raise HostError(str(exc)) from None
        chosen[canonicalize_name(name)] = f"{name}=={version_}"
        fitted |= {canonicalize_name(n) for n in requires(wheel)}
    out = []
    for pin in pins:
        name = canonicalize_name(Requirement(pin).name)
        out.append(name if name in fitted and name not in chosen else chosen.pop(name, pin))
    return out + sorted(chosen.values())


def environment_archives(root: Path, pins: list[str], version_sets: list[dict[str, str]]) -> dict[str, dict]:
    """{environment name: {name, site, requirements}} of each version set: its wheelhouse and the
    environment installed from it (:func:`site_archive`), built on the controller (content-keyed:
    reused across sweeps). A set pip cannot satisfy is a HostError before any host is touched."""
    out = {}
    for versions in version_sets:
        env_pins = environment_pins(pins, versions)
        name = house_name(env_pins)
        try:
            archive = site_archive(root, env_pins)
        except HostError as exc:
            wanted = ", ".join(f"package.{n} {v}" for n, v in versions.items())
            raise HostError(f"the environment of {wanted}: {exc}") from None
        out[name] = {"name": name, "site": str(archive.resolve()), "requirements": env_pins}
    return out


def content_key(site: Path, pins: list[str], lib: Path, envs: list[str] = ()) -> str:
    """What a provisioned host holds, as one key: the installed environment (named by Python
    version and pins), the pins themselves (the user's requirements among them), the shipped code
    (named by its content) and the ``package.*`` environments (named by theirs). A host holding the same
    key needs nothing (roles/python_env checks it first)."""
    return hashlib.sha256("\n".join([site.name, *pins, lib.name, *sorted(envs)]).encode()).hexdigest()[:16]


def _service_vars(services: dict[str, list[str]], inventory: Inventory | None = None) -> dict[str, Any]:
    """What services.yml and services_stop.yml loop over: each server to start (or stop) with its
    hosts (the play applies the role of that name on them), all their hosts, each server's role
    parameters, and, when starting (``inventory``), what each server's role needs of the
    inventory besides (a set spread over its hosts: its layout)."""
    names = [name for name in servers.SERVERS if name in services]  # the registry's order
    out: dict[str, Any] = {
        "cmx_services": [{"name": name, "hosts": list(services[name])} for name in names],
        "cmx_service_hosts": ",".join(sorted({h for hosts in services.values() for h in hosts})),
    }
    for name in names:
        out.update(servers.get(name).role_vars)
        if inventory is not None:
            out.update(servers.get(name).provision_vars(inventory))
    return out


@dataclass(frozen=True)
class Shipment:
    """What provisioning ships, built on the controller before any host is touched: the
    environment installed from the wheelhouse, the pins, the ``package.*`` environments, the
    shipped code, and their content key."""

    site: Path  # the base venv's site-packages (engine/hosts/wheelhouse.py site_archive)
    pins: tuple[str, ...]
    envs: tuple[dict, ...]
    chosen: dict[str, str]  # version set key -> environment name
    lib: Path
    key: str
    #: The platform and glibc the compiled wheels ask of a host (:func:`host_needs`; the role checks).
    needs: dict[str, str] = field(default_factory=lambda: {"platform": "", "glibc": ""})

    @property
    def lib_key(self) -> str:
        """The shipped code's folder on a host (``lib/<lib_key>``, on the agent's PYTHONPATH)."""
        return self.lib.name.removesuffix(".tar")

    def key_files(self, conn: Connection) -> list[str]:
        """Where a host provisioned with this shipment records its key (roles/python_env)."""
        return [f"{conn.workdir}/venv/.cmx-key", f"{conn.workdir}/lib/{self.lib_key}/.cmx-key"]

    def held_by(self, text: str) -> bool:
        """Whether what :meth:`key_files` hold on a host (one after the other) is this key, twice:
        the role's own check (roles/python_env/tasks/main.yml), made without a playbook."""
        return text.split() == [self.key, self.key]


def _wheelhouses(work_dir: Path) -> Path:
    """:data:`WHEELHOUSES`, or the results folder's ``wheelhouse/`` where that cannot be written."""
    try:
        WHEELHOUSES.mkdir(parents=True, exist_ok=True)
    except OSError:
        return work_dir / "wheelhouse"
    return WHEELHOUSES if os.access(WHEELHOUSES, os.W_OK) else work_dir / "wheelhouse"


def prepare(
    work_dir: Path,
    user_code: dict[str, Path] | None = None,
    requirements: list[str] | None = None,
    version_sets: list[dict[str, str]] | None = None,
    workload_needs: tuple[str, ...] = (),
) -> Shipment:
    """Build (or find, by content) everything the hosts get: a HostError before any host is touched
    when a wheelhouse cannot be built. ``workload_needs``: the workload's own host packages."""
    pins = host_requirements(workload_needs) + list(requirements or [])  # the user's tasks' own, as written
    houses = _wheelhouses(work_dir)
    site = site_archive(houses, pins)
    envs, chosen = {}, {}
    for versions in version_sets or []:
        ((name, env),) = environment_archives(houses, pins, [versions]).items()
        envs[name], chosen[version_set_key(versions)] = env, name
    lib = workloads_archive(work_dir / "wheelhouse", user_code).resolve()
    needs = host_needs([houses / house_name(pins), *(houses / name for name in envs)])  # envs: by house name
    return Shipment(
        site.resolve(), tuple(pins), tuple(envs.values()), chosen, lib, content_key(site, pins, lib, list(envs)), needs
    )


def provision_hosts(
    inventory: Inventory,
    hosts: list[str],
    work_dir: Path,
    shipment: Shipment,
    held: set[str] = frozenset(),
    on_result: Callable[[str, PlaybookResult], None] | None = None,
) -> list[str]:
    """Make ``hosts`` ready (venv with the pinned dependencies, the workloads package, one more
    environment per ``package.*`` version set) with ``provision.yml``, all at once; the hosts in
    ``held`` were seen holding the shipment's key (:func:`cmx.engine.hosts.reach.survey`) and are
    left as they are, without a playbook. Returns the hosts the playbook set up."""
    todo = [h for h in hosts if h not in held]
    if not todo:
        return []
    result = run_playbook(
        "provision.yml",
        inventory.path,
        work_dir / "ansible" / "provision",
        extravars={
            "cmx_hosts": ",".join(todo),
            "python_env_site": str(shipment.site),
            "python_env_python_version": python_version(),
            "python_env_platform": shipment.needs["platform"],
            "python_env_glibc": shipment.needs["glibc"],
            "python_env_workloads": str(shipment.lib),
            "python_env_envs": list(shipment.envs),
            "python_env_key": shipment.key,
        },
        forks=len(todo),
        secrets={},
    )
    if on_result:
        on_result("provision.yml", result)
    if not result.ok:
        raise HostError(f"provisioning failed: {result.summary()}")
    return todo


def start_services(
    inventory: Inventory,
    services: dict[str, list[str]],
    work_dir: Path,
    on_result: Callable[[str, PlaybookResult], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> None:
    """Start the servers the sweep provisions itself (where the inventory gives no URL for a kind it uses).
    Their roles need nothing of provision.yml's, so a sweep runs this beside it. ``cancel()`` true:
    the playbook is stopped (the sweep then stops what it started)."""
    if not services:
        return
    # Each service is its role's name (workloads/vocab/kinds.py); its password reaches the role
    # from the controller's environment.
    secrets = {servers.get(service).password_env: inventory.password(service) for service in services}
    started = run_playbook(
        "services.yml",
        inventory.path,
        work_dir / "ansible" / "services",
        extravars=_service_vars(services, inventory),
        secrets=secrets,
        cancel=cancel,
    )
    if on_result:
        on_result("services.yml", started)
    if not started.ok:
        raise HostError(f"provisioning {', '.join(services)} failed: {started.summary()}")


def provision(
    inventory: Inventory,
    hosts: list[str],
    work_dir: Path,
    services: dict[str, list[str]],
    user_code: dict[str, Path] | None = None,
    requirements: list[str] | None = None,
    on_result: Callable[[str, PlaybookResult], None] | None = None,
    version_sets: list[dict[str, str]] | None = None,
    conns: dict[str, Connection] | None = None,
) -> tuple[str, dict[str, str]]:
    """:func:`prepare`, then :func:`provision_hosts` beside :func:`start_services`. With ``conns``
    (the hosts' connections) a host already holding the content key is only checked: one round
    trip each, all at once. Returns the key of the shipped code (playbooks put ``lib/<key>`` on
    PYTHONPATH) and {version set key: environment name} (:func:`version_set_key`; the host's
    ``envs/<name>``). ``on_result`` sees each playbook's result (what changed: a second converge
    changes nothing)."""
    from cmx.engine.hosts.reach import survey

    shipment = prepare(work_dir, user_code, requirements, version_sets)
    with services_beside(inventory, services, work_dir, on_result):
        held: set[str] = set()
        if conns:
            _, keys = survey({h: conns[h] for h in hosts}, shipment.key_files)
            held = {h for h, text in keys.items() if shipment.held_by(text)}
        provision_hosts(inventory, hosts, work_dir, shipment, held, on_result)
    return shipment.lib_key, dict(shipment.chosen)


@contextmanager
def services_beside(
    inventory: Inventory,
    services: dict[str, list[str]],
    work_dir: Path,
    on_result: Callable[[str, PlaybookResult], None] | None = None,
) -> Iterator[None]:
    """:func:`start_services` in a thread while the body sets up the hosts (and starts their
    agents): the two playbooks' start-up and round trips overlap. Its HostError is raised when the
    body ends; a body that raised (Ctrl-C, a host that failed) cancels it and waits for it to end
    (the sweep then stops what it started)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        started = pool.submit(start_services, inventory, services, work_dir, on_result, stop.is_set)
        try:
            yield
        except BaseException:
            stop.set()
            started.exception()
            raise
        started.result()


def version_set_key(versions: dict[str, str]) -> str:
    """A ``package.*`` version set as one string (the key :func:`provision`'s mapping uses)."""
    return ",".join(f"{n}={v}" for n, v in sorted(versions.items()))


def stop_services(
    inventory: Inventory,
    services: dict[str, list[str]],
    work_dir: Path,
    on_result: Callable[[str, PlaybookResult], None] | None = None,
) -> str | None:
    """Stop what :func:`provision` started for the sweep; a one-line warning if that failed
    (the sweep's results are stored either way)."""
    # Each server's parameters and secrets reach its stop as they reached its start: a set's layout
    # (where its members run) and its password (a RabbitMQ cluster's tools need the nodes' cookie).
    secrets = {servers.get(service).password_env: inventory.password(service) for service in services}
    result = run_playbook(
        "services_stop.yml",
        inventory.path,
        work_dir / "ansible" / "services_stop",
        extravars=_service_vars(services, inventory),
        secrets=secrets,
    )
    if on_result:
        on_result("services_stop.yml", result)
    if result.ok:
        return None
    return (
        f"stopping the services the sweep started ({', '.join(services)}) failed: {result.summary()} "
        f"(see {work_dir / 'ansible' / 'services_stop'})"
    )

"""The Ansible inventory of a sweep: which hosts play which part, and where the services are.

Parsed by Ansible's own ``InventoryManager`` (YAML or INI, the user's connection variables as they
are). Host groups: ``brokers``, ``backends``, ``workers``, ``drivers``, ``services``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx.engine import limits
from cmx.engine.errors import InputError, Problem
from cmx.engine.hosts.invvars import PORT_VARS  # noqa: F401 (re-exported: the port variables, defined there)
from cmx.engine.model.yamlpos import check_yaml_syntax
from cmx.engine.paths import BUILTIN_INVENTORY, LOCAL_INVENTORY
from cmx.workloads.vocab import kinds
from cmx.workloads.servers import registry as servers

GROUPS = ("brokers", "backends", "workers", "drivers", "services")
REQUIRED_GROUPS = ("brokers", "workers", "drivers")

#: Each target's inventory group and the variable giving its URL (kinds: workloads/vocab/kinds.py).
SERVED_BY = {"broker": ("brokers", "broker_url"), "backend": ("backends", "backend_url")}


@dataclass(frozen=True)
class Inventory:
    path: Path
    groups: dict[str, tuple[str, ...]]
    #: Only the variables celery-matrix reads (``broker_url``, ``backend_url``, ``cmx_workdir`` …).
    hostvars: dict[str, dict[str, Any]]
    #: Where a generated server password is kept (beside the results database).
    secrets_dir: Path = Path("results")
    _passwords: dict[str, str] = field(default_factory=dict, init=False, compare=False, repr=False)

    def password(self, service: str) -> str:
        """Password of a server the sweep provisions (the inventory's ``<service>_password``,
        ``CMX_<SERVICE>_PASSWORD``, or generated); the same for the whole sweep."""
        if service not in self._passwords:
            self._passwords[service] = _password(servers.get(service), self.hostvars, self.groups, self.secrets_dir)
        return self._passwords[service]

    def hosts_of(self, group: str) -> tuple[str, ...]:
        return self.groups.get(group, ())

    def groups_of(self, host: str) -> tuple[str, ...]:
        return tuple(g for g in GROUPS if host in self.groups.get(g, ()))

    def workers_for(self, machines: int) -> tuple[str, ...]:
        """The first ``machines`` hosts of group ``workers``."""
        return self.hosts_of("workers")[:machines]

    def driver(self) -> str:
        return self.hosts_of("drivers")[0]

    def drivers_for(self, drivers: int) -> tuple[str, ...]:
        """The first ``drivers`` hosts of group ``drivers`` (the first of them leads the run)."""
        return self.hosts_of("drivers")[:drivers]

    def broker_url(self, kind: str) -> str:
        return self._service_url("broker", kind)

    def given_url(self, group: str, var: str, schemes: tuple[str, ...]) -> str | None:
        """The URL the inventory gives for a server of these schemes (bring your own), if any."""
        return self._given(group, var, lambda url: url.split("://", 1)[0] in schemes)

    def kind_url(self, target: str, name: str) -> str | None:
        """The URL the inventory gives for kind ``name`` of ``target``, if any: one its server takes
        (workloads/servers: ``takes_url``; a cluster's is the list of its nodes' URLs)."""
        group, var = SERVED_BY[target]
        return self._given(group, var, lambda url: servers.takes_url(target, name, url))

    def _given(self, group: str, var: str, fits) -> str | None:
        hosts = self.hosts_of(group)
        urls = (self.hostvars.get(hosts[0], {}).get(var) or []) if hosts else []
        for url in [urls] if isinstance(urls, str) else urls:
            if fits(str(url)):
                return str(url)
        return None

    def services_to_provision(self, brokers: set[str], backends: set[str]) -> dict[str, list[str]]:
        """{kind: hosts} where the sweep must start a service: the kind is used there, the sweep
        can provision it, and the inventory gives no URL for it."""
        wanted: dict[str, set[str]] = {}
        for target, used in (("broker", brokers), ("backend", backends)):
            group, var = SERVED_BY[target]
            for name in sorted(used):
                kind = kinds.TARGETS[target].get(name)
                if kind is None or not kind.provisionable:
                    continue
                if self.hosts_of(group) and not self.kind_url(target, name):
                    server = servers.get(kind.service)
                    wanted.setdefault(server.name, set()).update(server.provision_hosts(self.hosts_of(group)))
        return {service: sorted(hosts) for service, hosts in sorted(wanted.items())}

    def service_host(self) -> str:
        hosts = self.hosts_of("services")
        if not hosts:
            raise InputError(
                Problem(
                    "the workload needs a host in group 'services' (its HTTP service or database runs there)",
                    str(self.path),
                )
            )
        return hosts[0]

    def address(self, host: str) -> str:
        """How other hosts reach ``host``: its ``ansible_host``, else its name (localhost → 127.0.0.1)."""
        addr = self.hostvars.get(host, {}).get("ansible_host") or host
        return "127.0.0.1" if addr == "localhost" else str(addr)

    def database_url(self) -> str:
        host = self.service_host()
        url = self.hostvars.get(host, {}).get("database_url")
        if not url:
            raise InputError(
                Problem(
                    f"host '{host}' of group 'services' has no database_url (the workload queries a "
                    "database: give e.g. postgresql://user:pass@host:5432/db)",
                    str(self.path),
                )
            )
        return str(url)

    def backend_url(self, kind: str) -> str | None:
        if kinds.BACKENDS[kind].service is None:
            return None
        return self._service_url("backend", kind)

    def _service_url(self, target: str, kind: str) -> str:
        group, var = SERVED_BY[target]
        schemes = servers.schemes(target, kind)
        hosts = self.hosts_of(group)
        if not hosts:
            raise InputError(Problem(f"no host in group '{group}', needed for {target} '{kind}'", str(self.path)))
        host = hosts[0]
        url = self.kind_url(target, kind)
        if url:
            return url
        if kinds.TARGETS[target][kind].provisionable:
            return servers.service_of(target, kind).provisioned_url(self, group, kinds.TARGETS[target][kind].db)
        raise InputError(
            Problem(
                f"host '{host}' of group '{group}' has no {var} for {kind} (give one whose scheme is "
                f"{' or '.join(s + '://' for s in schemes)}, as a string or in a list)",
                str(self.path),
            )
        )


def _password(service: servers.Server, hostvars: dict[str, dict[str, Any]], groups: dict, secrets_dir: Path) -> str:
    """The inventory's <service>_password, else CMX_<SERVICE>_PASSWORD, else one generated once and
    kept (0600) in ``secrets_dir/.secrets.json``: out of the repository, the same for every sweep."""
    import json
    import os
    import secrets

    key, env = service.password_var, service.password_env
    for group in ("brokers", "backends"):
        for host in groups.get(group, ()):
            if hostvars.get(host, {}).get(key):
                return str(hostvars[host][key])
    if os.environ.get(env):
        return os.environ[env]
    store = secrets_dir / ".secrets.json"
    data = json.loads(store.read_text()) if store.exists() else {}
    if key not in data:
        data[key] = secrets.token_urlsafe(24)
        secrets_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(store, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
    return data[key]


def _yaml_files(path: Path) -> list[Path]:
    """The YAML files Ansible will read for this inventory: the file (or every one under the
    directory) and the group_vars/ and host_vars/ beside it."""
    roots = [path] if path.is_dir() else [path.parent / "group_vars", path.parent / "host_vars"]
    found = [path] if path.is_file() and path.suffix in (".yml", ".yaml") else []
    for root in roots:
        if root.is_dir():
            found += sorted(
                p
                for p in root.rglob("*")
                if p.suffix in (".yml", ".yaml")
                and p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(root).parts)
            )
    return found[: limits.MAX_INVENTORY_FILES]


def choose_inventory(option: Path | None, in_file: str | None, experiment_file: str | Path) -> Path:
    """The inventory a sweep uses, the first of: ``--inventory`` (``option``, relative to the current
    folder as every command-line path is); the experiment's ``inventory:`` (relative to the
    experiment file's folder, as its tasks module and workload files are; else, as before 0.2, from
    the current folder); ``inventory/local.yml``
    in the current folder; the built-in localhost inventory. One that is named but missing is bad
    input, never silently replaced by the next."""
    import os

    if option is not None:
        if not option.exists():
            raise InputError(Problem("inventory not found (named by --inventory)", str(option)))
        return option
    if in_file:
        folder = Path(experiment_file).parent
        path = Path(os.path.normpath(folder / Path(in_file).expanduser()))
        if not path.exists() and not Path(in_file).is_absolute() and Path(in_file).exists():
            # Written from the current folder, as files before 0.2 were (DESIGN's own example
            # `inventory: inventory/local.yml`): still found, so no existing file breaks.
            return Path(in_file)
        if not path.exists():
            raise InputError(_missing_in_file(in_file, path, experiment_file))
        return path
    return BUILTIN_INVENTORY if uses_builtin(option, in_file) else LOCAL_INVENTORY


def uses_builtin(option: Path | None, in_file: str | None) -> bool:
    """Whether :func:`choose_inventory` falls back to the built-in inventory (nothing named, no
    ./inventory/local.yml): what cmx says in one line. Naming the built-in file itself is naming one."""
    return option is None and not in_file and not LOCAL_INVENTORY.exists()


def _missing_in_file(in_file: str, path: Path, experiment_file: str | Path) -> Problem:
    """One line at the file's ``inventory:``."""
    from cmx.engine.model.yamlpos import load_yaml

    line = col = None
    try:
        line, col = load_yaml(experiment_file)[1].of(("inventory",))
    except InputError:
        pass
    return Problem(
        f"inventory: {path} not found (a relative inventory is found from the experiment file's "
        "folder, or else from the current folder)",
        str(experiment_file),
        line,
        col,
    )


def load_inventory(path: Path | str, secrets_dir: Path = Path("results")) -> Inventory:
    """Parse an inventory (a file or a directory) with Ansible; bad or incomplete inventories and
    ill-typed cmx variables raise InputError naming the file (and the host and variable)."""
    from ansible.inventory.manager import InventoryManager
    from ansible.vars.manager import VariableManager

    from cmx.engine.hosts.invvars import VARIABLES, check, vault_loader

    path = Path(path)
    if not (path.is_file() or path.is_dir()):
        raise InputError(Problem("inventory not found", str(path)))
    for file in _yaml_files(path):
        check_yaml_syntax(file)  # Ansible would only warn, at length, and then see no hosts
    loader = vault_loader()
    try:
        manager = InventoryManager(loader=loader, sources=[str(path)], parse=True)
    except Exception as exc:  # Ansible's own parse errors
        raise InputError(Problem(f"cannot parse inventory: {exc}".splitlines()[0], str(path))) from exc
    if not manager.list_hosts("all"):
        raise InputError(Problem("no hosts in inventory (is it YAML or INI Ansible inventory?)", str(path)))
    groups = {g: tuple(h.name for h in manager.groups[g].get_hosts()) for g in GROUPS if g in manager.groups}
    missing = [g for g in REQUIRED_GROUPS if not groups.get(g)]
    if missing:
        raise InputError(
            Problem(
                f"inventory has no hosts in group(s) {', '.join(missing)} "
                f"(every sweep needs brokers, workers and drivers)",
                str(path),
            )
        )
    variables = VariableManager(loader=loader, inventory=manager)
    hostvars = {}
    for host in manager.list_hosts("all"):
        try:
            hv = variables.get_vars(host=host)
        except Exception as exc:  # a vaulted vars file without its password, a bad vars file
            raise InputError(
                Problem(
                    f"cannot read the variables of host '{host.name}': "
                    f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}",
                    str(path),
                )
            ) from None
        hostvars[host.name] = {
            k: check(str(path), host.name, k, hv[k]) for k in VARIABLES if k in hv and hv[k] is not None
        }
    return Inventory(path=path, groups=groups, hostvars=hostvars, secrets_dir=secrets_dir)

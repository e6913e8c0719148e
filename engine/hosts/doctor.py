"""``cmx doctor``: can a sweep run on this inventory? Every host and service it needs, checked in
parallel, each check bounded, one line each with the fix.

Hosts: engine/hosts/doctor_hosts.py (reach, Python, become, disk, clock). Services,
from the controller as the sweep's preflight reaches them (engine/hosts/preflight.py): broker and
backend URLs with their credentials, RabbitMQ's management API (the sampler's probe,
workloads/host/connprobes.py), the workload's PostgreSQL. URLs are printed redacted, and every
line is scrubbed of the inventory's passwords besides.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import unquote, urlsplit

from cmx.engine.hosts import localservices
from cmx.engine.hosts.connection import LOOPBACK
from cmx.engine.hosts.inventory import GROUPS, SERVED_BY, Inventory
from cmx.engine.hosts.preflight import check_broker, check_server, redact
from cmx.workloads.vocab import kinds
from cmx.workloads.servers import registry as servers
from cmx.workloads.vocab.clients import BROKER

#: Bound of one service check (its client's own connect timeout is 5 s, the API probe's 10 s).
SERVICE_BOUND_S = 20.0

OK, FAIL, WARN = "ok", "fail", "warn"
_MARKS = {OK: ("✓", "ok"), FAIL: ("✗", "FAIL"), WARN: ("!", "warn")}


@dataclass(frozen=True)
class Check:
    what: str
    where: str
    state: str
    detail: str
    fix: str = ""


def line(check: Check, unicode: bool = True) -> str:
    """``✓ what  where: detail`` (``— fix: …`` when it failed or warns)."""
    mark = _MARKS[check.state][0 if unicode else 1]
    text = f"{mark} {check.what:<16} {check.where}: {check.detail}"
    return text + (f" — fix: {check.fix}" if check.fix and check.state != OK else "")


def exit_code(checks: list[Check]) -> int:
    """0 when a sweep can run (warnings allowed), 1 when any check failed."""
    return 1 if any(c.state == FAIL for c in checks) else 0


def scrub(text: str, secrets: set[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def secrets_of(inv: Inventory) -> set[str]:
    """Every password the inventory holds (in URLs, or ``*_password``), to keep out of any line."""
    found = set()
    for variables in inv.hostvars.values():
        for key, value in variables.items():
            for item in value if isinstance(value, list) else [value]:
                if key.endswith("_password") and item:
                    found.add(str(item))
                elif isinstance(item, str) and "://" in item:
                    password = urlsplit(item.removeprefix("db+")).password
                    if password:
                        found |= {password, unquote(password)}
    return {s for s in found if len(s) >= 3}  # "***" itself, and no common short word


@dataclass(frozen=True)
class Task:
    """One bounded check, run in a thread of its own; ``run`` returns its lines."""

    what: str
    where: str
    bound_s: float
    run: Callable[[], list[Check]]


def run_all(tasks: list[Task]) -> list[Check]:
    """Every task at once; a task past its bound is a failed line. Lines come in the tasks' order."""
    results: list[list[Check] | None] = [None] * len(tasks)

    def work(i: int, task: Task) -> None:
        try:
            results[i] = task.run()
        except Exception as exc:  # a check never stops the others: its failure is its line
            results[i] = [Check(task.what, task.where, FAIL, f"{type(exc).__name__}: {_first_line(exc)}")]

    # kombu sets itself up lazily as it is first imported: threads importing it at once may find
    # half of it ("cannot import name 'Connection' from 'kombu'", a broker check failing for
    # nothing). So it is imported here, before the checks' threads start.
    from kombu import Connection  # noqa: F401

    threads = [
        threading.Thread(target=work, args=(i, t), daemon=True, name=f"cmx-doctor-{i}") for i, t in enumerate(tasks)
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    for thread, task in zip(threads, tasks):
        thread.join(max(0.0, started + task.bound_s - time.monotonic()))
    return [
        c
        for i, task in enumerate(tasks)
        for c in (
            results[i]
            or [
                Check(
                    task.what,
                    task.where,
                    FAIL,
                    f"no answer within {task.bound_s:g} s",
                    "see that it is up and reachable",
                )
            ]
        )
    ]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


# --------------------------------------------------------------------------------- services


def _fix(url: str, var: str, inv_path: str) -> str:
    """Where the URL is this machine's: the exact commands that start it; else where to look."""
    parts = urlsplit(url.removeprefix("db+"))
    service = next((s for s in servers.SERVERS.values() if parts.scheme in s.schemes), None)
    local = localservices.for_kind(service.name) if service else None
    if parts.hostname in LOOPBACK and local is not None:
        port = parts.port or service.schemes[parts.scheme]
        if port == local.port:
            return f"start it: `cmx services up` (runs: {localservices.command_text(local)})"
        return (
            f"nothing answers on port {port}: `cmx services up` starts {local.name} on "
            f"127.0.0.1:{local.port}; point {var} in {inv_path} there"
        )
    return f"is it running, and is {var} in {inv_path} right?"


def url_task(what: str, url: str, var: str, inv_path: str, probe: Callable[[], None]) -> Task:
    where = redact(url)

    def run() -> list[Check]:
        try:
            probe()
        except Exception as exc:
            cause = exc.__cause__ or exc
            return [
                Check(
                    what,
                    where,
                    FAIL,
                    f"does not answer: {type(cause).__name__}: {_first_line(cause)}",
                    _fix(url, var, inv_path),
                )
            ]
        return [Check(what, where, OK, "answers")]

    return Task(what, where, SERVICE_BOUND_S, run)


def _backend_probe(url: str) -> Callable[[], None]:
    scheme = urlsplit(url.removeprefix("db+")).scheme
    service = next((s.name for s in servers.SERVERS.values() if scheme in s.schemes), None)
    backends = {k.service for k in kinds.BACKENDS.values() if k.service}

    def probe() -> None:
        if service not in backends:  # a server no backend kind talks to
            raise ValueError(f"cmx speaks no {scheme}:// to a backend or database")
        check_server(service, url, timeout=5.0)

    return probe


def _served(target: str, url: str) -> bool:
    """Whether some kind of ``target`` (broker, backend) talks to a server at this URL's scheme."""
    scheme = urlsplit(url.removeprefix("db+")).scheme
    return any(scheme in servers.schemes(target, name) for name in kinds.TARGETS[target])


def _urls(inv: Inventory, target: str) -> list[str]:
    group, var = SERVED_BY[target]
    hosts = inv.hosts_of(group)
    given = inv.hostvars.get(hosts[0], {}).get(var) if hosts else None
    return [str(u) for u in ([given] if isinstance(given, str) else given or [])]


@dataclass(frozen=True)
class Needs:
    """What a sweep will use: the broker and backend kinds (None: every URL the inventory gives),
    whether its workload queries the services host's database, and the hosts it runs on."""

    brokers: frozenset[str] | None = None
    backends: frozenset[str] | None = None
    database: bool | None = None
    hosts: tuple[str, ...] | None = None


def service_tasks(inv: Inventory, needs: Needs) -> list[Task]:
    path = str(inv.path)
    tasks: list[Task] = []
    for target, probe in (("broker", lambda u: lambda: check_broker(u, timeout=5.0)), ("backend", _backend_probe)):
        group, var = SERVED_BY[target]
        used = needs.brokers if target == "broker" else needs.backends
        if used is None:
            urls = [u for u in _urls(inv, target) if _served(target, u)]  # a run picks among these by scheme
            tasks += [url_task(target, u, var, path, probe(u)) for u in urls]
            continue
        for name in sorted(used):
            kind = kinds.TARGETS[target][name]
            if kind.service is None:
                continue
            url = inv.kind_url(target, name)
            if url:
                tasks.append(url_task(f"{target} {name}", url, var, path, probe(url)))
            else:  # a sweep starts its own (its role): nothing to reach yet
                tasks.append(
                    Task(
                        f"{target} {name}",
                        inv.hosts_of(group)[0],
                        1.0,
                        lambda t=target, n=name, g=group: [
                            Check(
                                f"{t} {n}", inv.hosts_of(g)[0], OK, f"no {var} for it: the sweep starts its own there"
                            )
                        ],
                    )
                )
    tasks += part_tasks(inv, needs)
    database = _database_url(inv)
    if needs.database or (needs.database is None and database):
        if database:
            tasks.append(url_task("database", database, "database_url", path, _backend_probe(database)))
        else:
            host = (inv.hosts_of("services") or ("group 'services'",))[0]
            tasks.append(
                Task(
                    "database",
                    host,
                    1.0,
                    lambda: [
                        Check(
                            "database",
                            host,
                            FAIL,
                            "the workload queries a database and none is given",
                            f"give database_url to a host of group 'services' in {path}",
                        )
                    ],
                )
            )
    return tasks


def part_tasks(inv: Inventory, needs: Needs) -> list[Task]:
    """The parts of the broker's servers besides their URLs (workloads/servers/: ``parts``), given
    by a variable of the ``brokers`` host: checked where given; where the server is the user's
    (given by URL) and the part is not, a warning saying what a sweep does without it."""
    path, tasks = str(inv.path), []
    brokers = inv.hosts_of("brokers")
    for server in servers.SERVERS.values():
        given = [u for u in _urls(inv, BROKER) if urlsplit(u).scheme in server.schemes]
        used = (
            any(kinds.BROKERS[b].service == server.name for b in needs.brokers)
            if needs.brokers is not None
            else bool(given)
        )
        for part in server.parts if used else ():
            url = inv.hostvars.get(brokers[0], {}).get(part.var) if brokers else None
            if url:
                tasks.append(url_task(part.label, url, part.var, path, lambda p=part, u=url: p.check(u)))
            elif given:
                tasks.append(
                    Task(
                        part.label,
                        redact(given[0]),
                        1.0,
                        lambda p=part, g=given: [
                            Check(
                                p.label,
                                redact(g[0]),
                                WARN,
                                f"no {p.var}: {p.without}",
                                f"give {p.var} for the brokers host in {path}",
                            )
                        ],
                    )
                )
    return tasks


def _database_url(inv: Inventory) -> str | None:
    hosts = inv.hosts_of("services")
    url = inv.hostvars.get(hosts[0], {}).get("database_url") if hosts else None
    return str(url) if url else None


def hosts_needed(inv: Inventory, needs: Needs) -> list[str]:
    if needs.hosts is not None:
        return list(needs.hosts)
    return list(dict.fromkeys(h for g in GROUPS for h in inv.hosts_of(g)))

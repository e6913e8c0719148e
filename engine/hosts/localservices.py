"""The services of this machine's sweeps (the default local inventory): Redis on 6379, RabbitMQ on
5672 (guest/guest) with its management API on 15672, PostgreSQL on 5432 (trust), all on loopback.

``cmx services up`` (``make services``) installs them from Debian's packages when missing and
starts those that do not answer; ``cmx doctor`` names the same commands as the fix when one of
them does not answer. The one list of how each is started here.
"""
from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cmx.engine.errors import HostError

#: Bound of one install or start command (apt-get on a slow mirror is the longest).
COMMAND_TIMEOUT_S = 600


@dataclass(frozen=True)
class LocalService:
    name: str
    #: workloads/kinds.py SERVICES name whose URLs this serves (the management API: None).
    kind: str | None
    port: int
    binary: str
    package: str
    #: Seconds it may take to answer once started.
    wait_s: int
    start: Callable[[], list[list[str]]]


def _postgres_start() -> list[list[str]]:
    versions = sorted((p.name for p in Path("/etc/postgresql").glob("*")), key=_version_key) \
        if Path("/etc/postgresql").is_dir() else []
    return [["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1] if versions else "VERSION", "main", "start"]]


def _version_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in name.split("."))


LOCAL: tuple[LocalService, ...] = (
    LocalService("Redis", "redis", 6379, "redis-server", "redis-server", 30, lambda: [
        ["mkdir", "-p", "/var/lib/redis", "/var/log/redis"],
        ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379", "--save", "",
         "--appendonly", "no", "--dir", "/var/lib/redis", "--logfile", "/var/log/redis/cmx.log"]]),
    LocalService("RabbitMQ", "rabbitmq", 5672, "rabbitmq-server", "rabbitmq-server", 90,
                 lambda: [["rabbitmq-server", "-detached"]]),
    # Cheap connection counts for the sampler (else rabbitmqctl, ~0.5 CPU-second a call).
    LocalService("RabbitMQ management", None, 15672, "rabbitmq-plugins", "rabbitmq-server", 60,
                 lambda: [["rabbitmq-plugins", "enable", "--quiet", "rabbitmq_management"]]),
    LocalService("PostgreSQL", "postgres", 5432, "pg_ctlcluster", "postgresql", 60, _postgres_start),
)


def answers(port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _as_root(argv: list[str]) -> list[str]:
    # sudo asks for a password on the terminal (not stdin) when it needs one; without one it fails.
    return argv if os.geteuid() == 0 else ["sudo", *argv]


def _install(service: LocalService) -> list[list[str]]:
    """Its install from Debian's packages when its program is missing."""
    if shutil.which(service.binary) or Path("/usr/sbin", service.binary).exists():
        return []
    return [_as_root(["apt-get", "update", "-qq"]), _as_root(["apt-get", "install", "-y", "-qq", service.package])]


def commands(service: LocalService) -> list[list[str]]:
    """What starts ``service`` here: its install when its program is missing, then its start."""
    return _install(service) + [_as_root(c) for c in service.start()]


def command_text(service: LocalService) -> str:
    """The commands as one shell line, for a fix a user can paste."""
    return " && ".join(shlex.join(c) for c in commands(service))


def for_kind(kind: str) -> LocalService | None:
    return next((s for s in LOCAL if s.kind == kind), None)


def up(say: Callable[[str], None]) -> list[str]:
    """Start every local service that does not answer; the names started. HostError names the
    command that failed or the service that did not come up within its bound."""
    started = []
    for service in LOCAL:
        if answers(service.port):
            continue
        say(f"starting {service.name} (127.0.0.1:{service.port})")
        for argv in _install(service):
            _run(service, argv)
        for argv in service.start():  # after the install: PostgreSQL's start names its version
            _run(service, _as_root(argv))
        deadline = time.monotonic() + service.wait_s
        while not answers(service.port):
            if time.monotonic() > deadline:
                raise HostError(f"{service.name} did not come up on 127.0.0.1:{service.port} within "
                                f"{service.wait_s} s (started with: {command_text(service)})")
            time.sleep(1)
        started.append(service.name)
    return started


def _run(service: LocalService, argv: list[str]) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=COMMAND_TIMEOUT_S, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HostError(f"{service.name}: `{shlex.join(argv)}` failed: {exc}") from None
    if proc.returncode != 0:
        last = ((proc.stderr or proc.stdout).strip().splitlines() or [""])[-1]
        raise HostError(f"{service.name}: `{shlex.join(argv)}` exited {proc.returncode}: {last}")

"""The services of this machine's sweeps (the default local inventory): Redis on 6379, RabbitMQ on
5672 (guest/guest) with its management API on 15672, PostgreSQL on 5432 (trust), all on loopback.

``cmx services up`` (``make services``) installs them from Debian's packages when missing and
starts those that do not answer; ``cmx doctor`` names the same commands as the fix when one of
them does not answer. How each is started here is its server module's ``local``
(workloads/servers/); this module runs them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

from cmx.engine.errors import HostError
from cmx.workloads.servers import registry as servers
from cmx.workloads.servers.base import LocalService

__all__ = ["LOCAL", "LocalService", "answers", "command_text", "commands", "for_kind", "up"]

#: Bound of one install or start command (apt-get on a slow mirror is the longest).
COMMAND_TIMEOUT_S = 600


#: Every server's local service (workloads/servers/, ``local``), in the vocabulary's order.
LOCAL: tuple[LocalService, ...] = tuple(s for server in servers.SERVERS.values() for s in server.local)


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
                raise HostError(
                    f"{service.name} did not come up on 127.0.0.1:{service.port} within "
                    f"{service.wait_s} s (started with: {command_text(service)})"
                )
            time.sleep(1)
        started.append(service.name)
    return started


def _run(service: LocalService, argv: list[str]) -> None:
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=COMMAND_TIMEOUT_S,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HostError(f"{service.name}: `{shlex.join(argv)}` failed: {exc}") from None
    if proc.returncode != 0:
        last = ((proc.stderr or proc.stdout).strip().splitlines() or [""])[-1]
        raise HostError(f"{service.name}: `{shlex.join(argv)}` exited {proc.returncode}: {last}")

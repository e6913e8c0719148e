"""The process helpers of a server's restart on its host (workloads/servers/: ``restart``,
``kill_node``): a bounded command, a pid file read, a process's end, a port's state."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Mapping


class RestartError(RuntimeError):
    """The server did not stop, or did not come back, within the restart's bound."""


def run(argv: list[str], timeout: float, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run one command of a restart, bounded; its failure names the command and what it said."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env} if env else None
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RestartError(f"{argv[0]}: {type(exc).__name__}: {exc}") from exc
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise RestartError(f"{' '.join(argv[:3])} exited {done.returncode}: {said[-1] if said else ''}")
    return done


def read_pid(path: str) -> int | None:
    try:
        return int(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_pid(pid: int | None, timeout: float) -> None:
    """SIGTERM, wait until it is gone for ``timeout``, then SIGKILL (as the roles' stop does)."""
    if pid is None or not alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
        while alive(pid) and time.monotonic() < deadline + 5:
            time.sleep(0.05)


def wait_port(host: str, port: int, up: bool, timeout: float) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            if up:
                return
        except OSError:
            if not up:
                return
        if time.monotonic() > deadline:
            raise RestartError(f"port {host}:{port} still {'closed' if up else 'open'} after {timeout:g}s")
        time.sleep(0.05)

"""One sweep at a time on a host's work dir (issue 43): the second waits, saying which sweep it waits for.

Two sweeps on one host share its work dir (``cmx_workdir``: the venv provisioning rewrites, the
servers a sweep provisions there with its own generated password and stops at its end) and its
brokers. Rather than let one sweep's provisioning or clean-up reach into another's runs, a sweep
holds a lock per (host, work dir) from before provisioning until its clean-up is done; a second
sweep that needs one of them prints one line naming the holder and waits, at most ``wait_s``
seconds (then a one-line HostError, exit 2, nothing provisioned or stored).

The locks are ``flock``s on files in the controller's temporary directory, keyed by the host's
address (or ``local``) and work dir: the kernel releases them when the holding controller dies,
however it dies, so a killed sweep never leaves a host locked. They order sweeps started from one
controller machine; sweeps from two controller machines on one host are not ordered by them.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Callable

from cmx.engine.errors import HostError

#: How long a sweep waits for another sweep on one of its hosts by default (``cmx run --host-wait``).
WAIT_S = 3600.0
#: How often a waiting sweep tries again.
POLL_S = 0.5


def lock_dir() -> Path:
    return Path(os.environ.get("CMX_LOCK_DIR") or Path(tempfile.gettempdir()) / f"cmx-host-locks-{os.getuid()}")


def key(conn) -> str:
    """The (host, work dir) a connection reaches: two inventories naming one machine alike share it."""
    where = "local" if conn.local else f"{conn.user or ''}@{conn.address}:{conn.port or 22}"
    return f"{where}:{os.path.normpath(conn.workdir)}"


class HostLocks:
    """The locks of one sweep: :meth:`acquire` before provisioning, :meth:`release` after clean-up."""

    def __init__(self, owner: dict, wait_s: float = WAIT_S, say: Callable[[str], None] = print):
        self.owner, self.wait_s, self.say = owner, wait_s, say
        self.held: dict[str, int] = {}

    def acquire(self, conns: dict) -> None:
        keys = {key(c): name for name, c in conns.items()}
        lock_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
        deadline = time.monotonic() + self.wait_s
        try:
            for k in sorted(keys):  # one order for every sweep: two never hold one each of two hosts
                self._take(k, keys[k], deadline)
        except BaseException:
            self.release()
            raise

    def _take(self, k: str, host: str, deadline: float) -> None:
        path = lock_dir() / (hashlib.sha256(k.encode()).hexdigest()[:24] + ".lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not said:
                    self.say(
                        f"cmx: host '{host}' ({k.split(':', 1)[1] if k.startswith('local:') else k}) is in use by "
                        f"{_holder(path)}; waiting for it to end (at most {self.wait_s:g} s)"
                    )
                    said = True
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise HostError(
                        f"host '{host}' is still in use by {_holder(path)} after {self.wait_s:g} s: "
                        "run again when it ends, give this sweep its own cmx_workdir, or raise "
                        "--host-wait"
                    ) from None
                time.sleep(POLL_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({**self.owner, "pid": os.getpid(), "since": time.strftime("%H:%M:%S")}).encode(), 0)
        self.held[k] = fd

    def release(self) -> None:
        for fd in self.held.values():
            try:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self.held.clear()


def _holder(path: Path) -> str:
    try:
        o = json.loads(path.read_text())
        return (
            f"the sweep of '{o.get('experiment')}' (pid {o.get('pid')}, results {o.get('db')}, since {o.get('since')})"
        )
    except (OSError, ValueError):
        return "another sweep"

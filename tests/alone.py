"""Tests that need the machine alone, in a suite that runs in parallel (pytest-xdist).

A test marked ``alone`` (a known answer that timing or the machine's whole load decides: a
three-node RabbitMQ cluster on one host, a host's noise measured, a heartbeat's detection
time) runs while no other test runs, and no other test starts until it ends. Every other test
runs beside any other. One readers-writer lock across the xdist workers does it, with the
kernel's ``flock`` on two files in the suite's shared temp root:

- ``gate``: taken for a moment by every test before it starts, and held by an ``alone`` test
  from before it waits until it ends, so no new test starts while one waits (no starvation);
- ``machine``: shared by every running test, exclusive for an ``alone`` test.

A test marked ``serial(name)`` shares the machine, but never runs beside another test of the same
``name`` (tests that share one broker database, say): an exclusive ``flock`` on ``serial-<name>``,
taken once it holds the machine. It costs the suite nothing while the others run.

A lock held by a killed worker is released by the kernel with its file. Waits are bounded
(``WAIT_S``): a test that cannot get the machine fails saying so rather than hanging the suite.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

#: The longest a test waits for the machine: the longest test beside it, with room.
WAIT_S = 1800.0


def _take(fd: int, how: int, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {WAIT_S:.0f} s for the machine ({what}): a test beside it never ended")
            time.sleep(0.2)


@contextlib.contextmanager
def hold(root: Path, alone: bool, serial: str | None = None):
    """The machine, shared (``alone`` False) or whole, for as long as the block runs; with
    ``serial``, also that group's own lock."""
    root.mkdir(parents=True, exist_ok=True)
    gate = os.open(root / "gate.lock", os.O_CREAT | os.O_RDWR, 0o600)
    machine = os.open(root / "machine.lock", os.O_CREAT | os.O_RDWR, 0o600)
    group = os.open(root / f"serial-{serial}.lock", os.O_CREAT | os.O_RDWR, 0o600) if serial else None
    try:
        _take(gate, fcntl.LOCK_EX, "gate")
        try:
            _take(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH, "alone" if alone else "shared")
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        if group is not None:
            _take(group, fcntl.LOCK_EX, f"serial {serial}")
        yield
    finally:
        for fd in (group, machine, gate):  # closing the files releases their locks
            if fd is not None:
                os.close(fd)

"""What the sampler watches: processes named by a pidfile or by the TCP port they listen on.

Each watch gives the tick's root pids for one role; the sampler adds their descendants.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import psutil

from cmx.workloads.host.procfs import ProcessTree, alive, holds, read_pidfile

#: How often an unresolved --watch-port retries: psutil.net_connections walks every fd on the host.
PORT_RETRY_S = 1.0


@dataclass(frozen=True)
class PidfileWatch:
    role: str
    path: Path

    def roots(self, tree: ProcessTree, now: float) -> list[int]:
        pid = read_pidfile(self.path)
        return [pid] if pid is not None and alive(pid) else []


class PortWatch:
    """The process(es) listening on a TCP port; resolved again whenever they are all gone."""

    def __init__(self, role: str, port: int) -> None:
        self.role, self.port = role, port
        self.ever_found = False
        self._roots: list[int] = []
        self._next_try = -math.inf

    def roots(self, tree: ProcessTree, now: float) -> list[int]:
        alive_roots = [pid for pid in self._roots if alive(pid)]
        if not alive_roots and now >= self._next_try:
            self._next_try = now + PORT_RETRY_S
            alive_roots = self._roots = self._resolve(tree)
            self.ever_found |= bool(alive_roots)
        return alive_roots

    def _resolve(self, tree: ProcessTree) -> list[int]:
        try:
            conns = psutil.net_connections(kind="tcp")
        except psutil.Error:
            return []
        holders = set()
        for c in conns:
            if c.pid and c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == self.port:
                holders.add(c.pid)
                # psutil names one holder per socket, and forked children inherit it: climb to
                # the ancestors that hold it too (a pre-fork server's master).
                try:
                    socket_link = os.readlink(f"/proc/{c.pid}/fd/{c.fd}")
                except OSError:
                    continue
                pid = c.pid
                while (pid := tree.parent(pid)) > 1 and holds(pid, socket_link):
                    holders.add(pid)
        # Keep the topmost holders; the others are their descendants.
        return sorted(pid for pid in holders if not tree.has_ancestor_in(pid, holders))

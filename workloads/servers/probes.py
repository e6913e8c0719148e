"""What every connection probe shares (workloads/host/connprobes.py runs them): a probe lists a
server's clients and counts those bearing the run's names (workloads/vocab/clientname.py), per client
role, and reads the memory the server says it uses (:meth:`ConnectionProbe.memory`). Each server's
own probe is in its module; URLs (they carry passwords) are never printed."""

from __future__ import annotations

import abc
import os
from collections import Counter

from cmx.workloads.vocab.clientname import CLIENTS, parse

PROBE_TIMEOUT_S = 10.0


class ProbeError(Exception):
    pass


def url_from_env(role: str) -> str:
    name = f"CMX_{role.upper()}_URL"
    url = os.environ.get(name)
    if not url:
        raise ProbeError(f"{name} is not set")
    return url


class ConnectionProbe(abc.ABC):
    """Counts the run's clients of one broker/backend (``role``), per client role."""

    min_period_s = 0.0

    def __init__(self, role: str, kind: str, run_id: str | None) -> None:
        self.role, self.kind, self.run_id = role, kind, run_id

    def count(self) -> dict[str, int]:
        """{client role: connections now} for the run's clients of this target (zeros included)."""
        if not self.run_id:
            raise ProbeError("no spec.json in the run dir: the run's clients cannot be told apart")
        counts = Counter({c: 0 for c in CLIENTS})
        for name in self.client_names():
            who = parse(name, self.run_id)
            if who is not None and who[1] == self.role:
                counts[who[0]] += 1
        return dict(counts)

    @abc.abstractmethod
    def client_names(self) -> list[str | None]:
        """The names of every client the service has now (None or "" for unnamed ones)."""

    def memory(self) -> dict[str, int] | None:
        """The memory the server says it uses now, by its own accounting: ``{node: bytes}`` for each
        node that answered (a cluster's every node; a single server's one, named by where it was
        reached, or ``""``), or None when this server cannot say (stored as nothing: NULL, never 0)."""
        return None

    def interrupt(self) -> None:
        """Called from another thread at shutdown: abort a slow count."""

    def close(self) -> None:
        pass

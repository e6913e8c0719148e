"""Connection probes of the sampler: how many clients *of this run* a broker or backend has.

Every cmx client names itself (workloads/vocab/clientname.py); a probe lists the server's clients and
counts those bearing the run's names, per client role (worker, driver) and only for its own target
(broker or backend): the probe itself, other runs, and any other client of the same server are
never counted, even when broker and backend are one Redis server. Sources: Redis ``CLIENT LIST``,
RabbitMQ's management API ``/api/connections`` (``user_provided_name``) or ``rabbitmqctl
list_connections client_properties``, PostgreSQL ``pg_stat_activity.application_name``.

At the same pace each probe reads the memory the server says it uses (``ConnectionProbe.memory``:
RabbitMQ's ``/api/nodes`` ``mem_used`` per node, Redis ``INFO memory`` ``used_memory``), kept apart
(``server_memory.csv``): a cluster's nodes are several processes, on several hosts, that no
``--watch`` can sum, and the broker's own count is what its memory alarms are checked against.

Each server's probe is in its module (workloads/servers/, ``probe``); this module runs them.
Standard library only at import; redis and psycopg2 are imported by the probes that need them.
URLs (they carry passwords) are never printed or written.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from typing import TYPE_CHECKING

from cmx.workloads.vocab.services import SERVICE_NAMES

if TYPE_CHECKING:
    from cmx.workloads.servers.probes import ConnectionProbe

__all__ = [
    "ConnectionProbe",
    "ConnectionSampler",
    "ProbeError",  # noqa: F822 (module __getattr__)
    "make_probe",
    "run_id_of",
    "MEMORY_HEADER",
]


def __getattr__(name: str):
    """The servers' modules (urllib.request, every server's client code: about a second of a loaded
    host's CPU) are imported when a probe is made, not with the sampler that every host of every
    run starts: most samplers (a worker's host) probe nothing."""
    if name in ("ConnectionProbe", "ProbeError"):
        from cmx.workloads.servers import probes

        return getattr(probes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


CONNECTIONS_HEADER = ("host", "role", "kind", "ts", "count", "client")
#: The memory the server says it uses, one row per node that answered a probe tick (server_memory.csv).
MEMORY_HEADER = ("host", "role", "kind", "ts", "node", "used_bytes")
#: A probe counts the clients of one server (``--connections ROLE=KIND``): the kinds are the services.
CONNECTION_KINDS = SERVICE_NAMES
#: How long exit waits for a probe in flight (its rows so far are kept either way).
PROBE_JOIN_S = 2.0


def run_id_of(run_dir: Path) -> str | None:
    """The run's id from its spec.json (the run dir's fixed name), None when there is none."""
    try:
        return json.loads((Path(run_dir) / "spec.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def make_probe(role: str, kind: str, run_id: str | None) -> ConnectionProbe:
    """The probe counting the run's clients of ``role`` (broker, backend), a server of ``kind``."""
    from cmx.workloads.servers import registry as servers

    return servers.get(kind).probe(role, run_id)


class ConnectionSampler:
    """Runs the probes in a thread of their own, so slow ones never delay memory ticks.
    ``errors`` has ``record(where, error)`` (the sampler's ErrorLog: it redacts secrets)."""

    def __init__(self, host: str, probes: list[ConnectionProbe], interval_s: float, errors) -> None:
        self._host, self._probes, self._interval_s, self._errors = host, probes, interval_s, errors
        self._rows: list[tuple] = []
        self._memory_rows: list[tuple] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cmx-connections", daemon=True)

    def start(self) -> None:
        if self._probes:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        for probe in self._probes:
            probe.interrupt()
        if self._thread.is_alive():
            self._thread.join(timeout=PROBE_JOIN_S)

    def take_rows(self) -> list[tuple]:
        with self._lock:
            rows, self._rows = self._rows, []
        return rows

    def take_memory_rows(self) -> list[tuple]:
        with self._lock:
            rows, self._memory_rows = self._memory_rows, []
        return rows

    def _memory(self, probe: ConnectionProbe) -> None:
        """The server's own count of its memory, at the probe's pace: one row per node that answered;
        none when it cannot say (its metric is then NULL, not 0)."""
        before = time.time()
        try:
            used = probe.memory()
        except Exception as exc:  # as a count's failure: data, recorded once
            if not self._stop.is_set():
                self._errors.record(f"memory {probe.role}={probe.kind}", exc)
            return
        if used:
            ts = round((before + time.time()) / 2, 6)
            with self._lock:
                self._memory_rows.extend(
                    (self._host, probe.role, probe.kind, ts, node, n) for node, n in sorted(used.items())
                )

    def _run(self) -> None:
        due = [time.monotonic()] * len(self._probes)
        while not self._stop.is_set():
            for i, probe in enumerate(self._probes):
                if time.monotonic() < due[i] or self._stop.is_set():
                    continue
                before = time.time()
                try:
                    counts = probe.count()
                except Exception as exc:  # a probe never stops the sampler: its failure is data
                    if not self._stop.is_set():  # not the kill of an interrupted probe
                        self._errors.record(f"connections {probe.role}={probe.kind}", exc)
                else:
                    ts = round((before + time.time()) / 2, 6)
                    with self._lock:
                        self._rows.extend(
                            (self._host, probe.role, probe.kind, ts, n, client) for client, n in sorted(counts.items())
                        )
                    self._memory(probe)  # the server answered: its memory now (not asked of one that is gone)
                period = max(self._interval_s, probe.min_period_s)
                due[i] = max(due[i] + period, time.monotonic())
            self._stop.wait(max(0.0, min(due) - time.monotonic()))
        for probe in self._probes:
            try:
                probe.close()
            except Exception:
                pass

"""Connection probes of the sampler: how many clients *of this run* a broker or backend has.

Every cmx client names itself (workloads/clientname.py); a probe lists the server's clients and
counts those bearing the run's names, per client role (worker, driver) and only for its own target
(broker or backend): the probe itself, other runs, and any other client of the same server are
never counted, even when broker and backend are one Redis server. Sources: Redis ``CLIENT LIST``,
RabbitMQ's management API ``/api/connections`` (``user_provided_name``) or ``rabbitmqctl
list_connections client_properties``, PostgreSQL ``pg_stat_activity.application_name``.

Standard library only at import; redis and psycopg2 are imported by the probes that need them.
URLs (they carry passwords) are never printed or written.
"""
from __future__ import annotations

import abc
import base64
import json
import os
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

from cmx.workloads.clientname import CLIENTS, parse
from cmx.workloads.kinds import SERVICES, libpq_url

CONNECTIONS_HEADER = ("host", "role", "kind", "ts", "count", "client")
#: A probe counts the clients of one server (``--connections ROLE=KIND``): the kinds are the services.
CONNECTION_KINDS = tuple(SERVICES)
#: rabbitmqctl boots an Erlang VM (~0.5 CPU-second a call): never run it more often than this.
RABBITMQCTL_MIN_PERIOD_S = 5.0
#: The management API's connection list changes only at its stats collection (1 s at the least,
#: as cmx's role sets it): asking more often only loads the broker.
RABBIT_API_MIN_PERIOD_S = 1.0
PROBE_TIMEOUT_S = 10.0
#: How long exit waits for a probe in flight (its rows so far are kept either way).
PROBE_JOIN_S = 2.0


class ProbeError(Exception):
    pass


def run_id_of(run_dir: Path) -> str | None:
    """The run's id from its spec.json (the run dir's fixed name), None when there is none."""
    try:
        return json.loads((Path(run_dir) / "spec.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _url_from_env(role: str) -> str:
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

    def interrupt(self) -> None:
        """Called from another thread at shutdown: abort a slow count."""

    def close(self) -> None:
        pass


class RedisProbe(ConnectionProbe):
    def __init__(self, role: str, kind: str, run_id: str | None) -> None:
        super().__init__(role, kind, run_id)
        self._client = None

    def client_names(self) -> list[str | None]:
        if self._client is None:
            from cmx.workloads.sentinel import redis_client  # redis lazily: only hosts that count Redis clients

            url = _url_from_env(self.role).replace("redis+socket://", "unix://", 1)
            self._client = redis_client(url, timeout=PROBE_TIMEOUT_S)  # a Sentinel set's: its master
        # Server-wide, every database: the names tell broker from backend and this run from others.
        return [c.get("name") for c in self._client.client_list()]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class RabbitApiProbe(ConnectionProbe):
    """GET /api/connections of the management plugin; base URL (with credentials) in CMX_RABBITMQ_API."""

    min_period_s = RABBIT_API_MIN_PERIOD_S

    def __init__(self, role: str, kind: str, run_id: str | None, base_url: str) -> None:
        super().__init__(role, kind, run_id)
        parts = urllib.parse.urlsplit(base_url)
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = f"[{netloc}]"
        if parts.port:
            netloc += f":{parts.port}"
        self._url = (f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}/api/connections"
                     "?columns=user_provided_name,client_properties")
        self._headers = {"Accept": "application/json"}
        if parts.username is not None:
            userpass = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            self._headers["Authorization"] = "Basic " + base64.b64encode(userpass.encode()).decode()

    def client_names(self) -> list[str | None]:
        request = urllib.request.Request(self._url, headers=self._headers)
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as response:
            return [c.get("user_provided_name") or (c.get("client_properties") or {}).get("connection_name")
                    for c in json.load(response)]


class RabbitCtlProbe(ConnectionProbe):
    """``rabbitmqctl -q list_connections client_properties``: slow and CPU-hungry, hence its own
    minimum period."""

    min_period_s = RABBITMQCTL_MIN_PERIOD_S

    def __init__(self, role: str, kind: str, run_id: str | None) -> None:
        super().__init__(role, kind, run_id)
        self._popen: subprocess.Popen | None = None
        self._closing = False

    def client_names(self) -> list[str | None]:
        if self._closing:
            raise ProbeError("sampler is stopping")
        self._popen = subprocess.Popen(
            ["rabbitmqctl", "-q", "list_connections", "--no-table-headers", "client_properties"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = self._popen.communicate(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.communicate()
            raise ProbeError(f"rabbitmqctl took more than {PROBE_TIMEOUT_S:g} s") from None
        finally:
            rc, self._popen = self._popen.returncode, None
        if rc != 0:
            last_line = (err.strip().splitlines() or [""])[-1]
            raise ProbeError(f"rabbitmqctl exit {rc}: {last_line}")
        # One line per connection; its properties print as Erlang terms, e.g.
        # {"connection_name","cmx.RUN.worker.broker"} (the name has no quotes or commas).
        pattern = re.compile(r'connection_name"?\s*,\s*(?:<<)?"([^"]*)"')
        return [(m.group(1) if (m := pattern.search(line)) else None) for line in out.splitlines() if line.strip()]

    def interrupt(self) -> None:
        self._closing = True
        popen = self._popen
        if popen is not None:
            try:
                popen.kill()
            except OSError:
                pass


class PostgresProbe(ConnectionProbe):
    def __init__(self, role: str, kind: str, run_id: str | None) -> None:
        super().__init__(role, kind, run_id)
        self._conn = None

    def client_names(self) -> list[str | None]:
        if self._conn is None:
            try:
                import psycopg2  # lazily: optional on hosts
            except ImportError:
                raise ProbeError("psycopg2 is not installed") from None
            self._conn = psycopg2.connect(libpq_url(_url_from_env(self.role)), connect_timeout=int(PROBE_TIMEOUT_S))
            self._conn.autocommit = True  # pg_stat_activity is a per-transaction snapshot
        try:
            with self._conn.cursor() as cur:
                cur.execute("SELECT application_name FROM pg_stat_activity WHERE datname = current_database()")
                return [r[0] for r in cur.fetchall()]
        except Exception:
            self.close()  # reconnect next time: the server may have restarted
            raise

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _rabbitmq_probe(role: str, kind: str, run_id: str | None) -> ConnectionProbe:
    api = os.environ.get("CMX_RABBITMQ_API")
    return RabbitApiProbe(role, kind, run_id, api) if api else RabbitCtlProbe(role, kind, run_id)


#: The probe of each server kind (workloads/kinds.py SERVICES; a unit test keeps them equal).
PROBES = {"redis": RedisProbe, "rabbitmq": _rabbitmq_probe, "postgres": PostgresProbe, "redis_sentinel": RedisProbe}


def make_probe(role: str, kind: str, run_id: str | None) -> ConnectionProbe:
    """The probe counting the run's clients of ``role`` (broker, backend), a server of ``kind``."""
    return PROBES[kind](role, kind, run_id)


class ConnectionSampler:
    """Runs the probes in a thread of their own, so slow ones never delay memory ticks.
    ``errors`` has ``record(where, error)`` (the sampler's ErrorLog: it redacts secrets)."""

    def __init__(self, host: str, probes: list[ConnectionProbe], interval_s: float, errors) -> None:
        self._host, self._probes, self._interval_s, self._errors = host, probes, interval_s, errors
        self._rows: list[tuple] = []
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
                        self._rows.extend((self._host, probe.role, probe.kind, ts, n, client)
                                          for client, n in sorted(counts.items()))
                period = max(self._interval_s, probe.min_period_s)
                due[i] = max(due[i] + period, time.monotonic())
            self._stop.wait(max(0.0, min(due) - time.monotonic()))
        for probe in self._probes:
            try:
                probe.close()
            except Exception:
                pass

"""RabbitMQ's connection probes (its module's ``probe``): the management API's ``/api/connections``
(and ``/api/nodes`` for the nodes' memory) when the run's processes are given its URL, else
``rabbitmqctl`` (connections only: its memory is not asked, a second Erlang VM a tick); and that API's URL and check on
the controller (the broker's secret, doctor's part). urllib.request is imported by the request
that needs it: with the servers' modules it would cost a loaded host's samplers CPU."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import urllib.parse

from cmx.workloads.vocab.clients import BROKER
from cmx.workloads.vocab.services import RABBITMQ

from .base import Hosts
from .probes import PROBE_TIMEOUT_S, ConnectionProbe, ProbeError

#: The inventory variable giving the management API's base URL (with credentials).
API_VAR = f"{RABBITMQ}_api_url"
#: The port cmx's own node serves it on unless the brokers host's ``rabbitmq_management_port`` says otherwise.
MANAGEMENT_PORT_VAR, MANAGEMENT_PORT = f"{RABBITMQ}_management_port", 15672
#: How the run's processes get it (the sampler's probe reads it).
API_ENV = f"CMX_{RABBITMQ.upper()}_API"


def api_url(hosts: Hosts, schemes: tuple[str, ...]) -> str | None:
    """The management API of the broker host, if given: connection counts come from it (cheap)
    instead of rabbitmqctl (~0.5 CPU-second a call on the sampling host). The node a sweep
    provisions serves it; a node given by URL (one of ``schemes``) only where the inventory says."""
    brokers = hosts.hosts_of("brokers")
    if not brokers:
        return None
    given = hosts.hostvars.get(brokers[0], {}).get(API_VAR)
    if given or hosts.given_url("brokers", "broker_url", schemes):
        return given
    port = int(hosts.hostvars.get(brokers[0], {}).get(MANAGEMENT_PORT_VAR, MANAGEMENT_PORT))
    return f"http://cmx:{hosts.password(RABBITMQ)}@{hosts.address(brokers[0])}:{port}"  # ours: API enabled


def check_api(url: str) -> None:
    """doctor's check of the API at ``url``: the sampler's own request (GET /api/connections)."""
    RabbitApiProbe(BROKER, RABBITMQ, None, url).client_names()


#: rabbitmqctl boots an Erlang VM (~0.5 CPU-second a call): never run it more often than this.
RABBITMQCTL_MIN_PERIOD_S = 5.0
#: The management API's connection list changes only at its stats collection (1 s at the least,
#: as cmx's role sets it): asking more often only loads the broker.
RABBIT_API_MIN_PERIOD_S = 1.0


def api_get(base_urls: str, path: str):
    """The JSON of a GET of ``path`` on the management API at ``base_urls`` (credentials in it: sent
    as a header). A cluster's is every node's API joined by ``;``: any node answers for all of
    them, so the first that answers is asked (a node killed by a fault answers no more)."""
    import urllib.request

    bases = base_urls.split(";")
    for i, base_url in enumerate(bases):
        parts = urllib.parse.urlsplit(base_url)
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = f"[{netloc}]"
        if parts.port:
            netloc += f":{parts.port}"
        headers = {"Accept": "application/json"}
        if parts.username is not None:
            userpass = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            headers["Authorization"] = "Basic " + base64.b64encode(userpass.encode()).decode()
        request = urllib.request.Request(f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}{path}", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as response:
                return json.load(response)
        except OSError:
            if i == len(bases) - 1:
                raise
    raise ProbeError("no management API given")


class RabbitApiProbe(ConnectionProbe):
    """GET /api/connections of the management plugin; base URL (with credentials) in API_ENV
    (a cluster's: every node's, ``;``-joined; :func:`api_get`)."""

    min_period_s = RABBIT_API_MIN_PERIOD_S

    def __init__(self, role: str, kind: str, run_id: str | None, base_url: str) -> None:
        super().__init__(role, kind, run_id)
        self._base = base_url

    def client_names(self) -> list[str | None]:
        return [
            c.get("user_provided_name") or (c.get("client_properties") or {}).get("connection_name")
            for c in api_get(self._base, "/api/connections?columns=user_provided_name,client_properties")
        ]

    def memory(self) -> dict[str, int]:
        """``mem_used`` of every node of the cluster (``/api/nodes``: any node answers for all) that
        is running: the node's own accounting (its memory breakdown's total, which its high
        watermark is checked against), as of its last stats collection."""
        nodes = api_get(self._base, "/api/nodes?columns=name,mem_used,running")
        return {
            str(n["name"]): int(n["mem_used"])
            for n in nodes
            if n.get("running", True) and n.get("mem_used") is not None
        }


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
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
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


def queue_from_api(api: str, vhost: str, queue: str) -> tuple[str, list[str]]:
    """``type`` of ``vhost``'s ``queue`` and the nodes holding it (a quorum queue's members, a
    classic queue's node), from the management API(s) at ``api``."""
    path = f"{urllib.parse.quote(vhost or '/', safe='')}/{urllib.parse.quote(queue, safe='')}"
    found = api_get(api, f"/api/queues/{path}?columns=type,node,members")
    return str(found["type"]), sorted(found.get("members") or [found.get("node")])


def rabbitmq_probe(role: str, kind: str, run_id: str | None, env: str = API_ENV) -> ConnectionProbe:
    api = os.environ.get(env)
    return RabbitApiProbe(role, kind, run_id, api) if api else RabbitCtlProbe(role, kind, run_id)

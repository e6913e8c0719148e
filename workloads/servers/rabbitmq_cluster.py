"""A RabbitMQ cluster: where its nodes run, its URL, its clients (broker kind ``rabbitmq-cluster``).

A cluster is N nodes (the first brokers host's ``rabbitmq_cluster_nodes``, 3 unless it says) spread
over the brokers hosts: node ``i`` on host ``i mod n``, so one host runs all three, three hosts one
each. Each node is a RabbitMQ node as roles/rabbitmq provisions one (roles/rabbitmq_cluster applies
it once per node, then joins the others to the first), with its own name, files and ports: its
AMQP, management and distribution ports count up from the host's first node's
(``rabbitmq_cluster_port`` 5681, ``rabbitmq_cluster_management_port`` 15681,
``rabbitmq_cluster_dist_port`` 25681), and its command-line tools take ports of their own
(``RABBITMQ_CTL_DIST_PORT_MIN``/``MAX``), so a cluster starts beside a RabbitMQ the host already runs.
The nodes share one Erlang cookie, derived from the cluster's password (:func:`cookie`) and given
in the environment, never on a command line.

Celery reaches it by kombu's failover list, every node's URL joined by ``;``
(``amqp://cmx:pw@h:5681//;amqp://cmx:pw@h:5682//;...``): a client connects to the first that
answers and moves on when its node dies. Its management API lists the connections of every node,
so the run's connection count is the sum over the nodes; the probe asks the first node that answers.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import time
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any, Mapping

from cmx.workloads.vocab.services import RABBITMQ_CLUSTER

from .base import Hosts, RestartError, alive, read_pid, run
from .probes import ConnectionProbe
from .rabbitmq import RabbitMQ
from .rabbitmq_probes import rabbitmq_probe

#: Nodes of a cluster, unless the first brokers host's ``rabbitmq_cluster_nodes`` says otherwise.
NODES = 3
#: The first node's ports on a host (each further node on it: +1), unless its vars say otherwise.
PORT, MANAGEMENT_PORT, DIST_PORT = 5681, 15681, 25681
#: The command-line tools' distribution ports of a node: its own block of this many, from
#: ``dist port + 10000`` on (RabbitMQ's own rule) and apart from the other nodes' on the host.
CTL_PORTS = 10
#: The user every node has (roles/rabbitmq's ``rabbitmq_user``).
USER = "cmx"


@dataclass(frozen=True)
class GroupHost:
    """A brokers host the cluster runs over: its inventory name, how other hosts reach it, its vars."""

    host: str
    address: str
    vars: Mapping[str, Any]


def group_hosts(hosts: Hosts, group: str = "brokers") -> list[GroupHost]:
    """Every host of ``group`` of the sweep's inventory, with its address and variables."""
    return [GroupHost(h, hosts.address(h), dict(hosts.hostvars.get(h, {}))) for h in hosts.hosts_of(group)]


#: The inventory variables the layout reads (the first brokers host's node count; each host's first
#: node's ports and folder), with their types (engine/hosts/invvars.py).
VARIABLES = MappingProxyType(
    {
        f"{RABBITMQ_CLUSTER}_nodes": "count",
        f"{RABBITMQ_CLUSTER}_management_port": "port",
        f"{RABBITMQ_CLUSTER}_dist_port": "port",
        f"{RABBITMQ_CLUSTER}_base_dir": "text",
    }
)
#: How the run's processes get the management APIs of every node (the sampler's probe, the
#: driver's queue type read-back), ``;``-joined.
API_ENV = f"CMX_{RABBITMQ_CLUSTER.upper()}_API"


@dataclass(frozen=True)
class Node:
    """Node ``index`` (1-based) of the cluster, on inventory host ``host`` (reached at ``address``)."""

    host: str
    address: str
    index: int
    name: str
    port: int
    management_port: int
    dist_port: int
    ctl_port_min: int
    ctl_port_max: int
    dir: str
    #: Erlang long names (``name@address``): nodes on several hosts reach each other by address.
    longname: bool


def layout(hosts: list[GroupHost]) -> list[Node]:
    """Where each node of the cluster runs over the broker ``hosts`` (see the module's text)."""
    if not hosts:
        raise ValueError("a RabbitMQ cluster needs at least one broker host")
    count, n = int(hosts[0].vars.get("rabbitmq_cluster_nodes", NODES)), len(hosts)
    nodes = []
    for i in range(count):
        h, k = hosts[i % n], i // n
        v = h.vars
        dist = int(v.get("rabbitmq_cluster_dist_port", DIST_PORT))
        slug = re.sub("[^A-Za-z0-9_-]", "-", h.host)
        base = v.get("rabbitmq_cluster_base_dir") or f"/var/lib/cmx-rabbitmq/{h.host}-cluster"
        ctl, port = dist + 10000 + CTL_PORTS * k, int(v.get("rabbitmq_cluster_port", PORT)) + k
        # Named by its AMQP port too: two clusters on one host (two sweeps' own) never share a name.
        nodes.append(
            Node(
                h.host,
                h.address,
                i + 1,
                f"cmx-{slug}-{port}@{h.address if n > 1 else 'localhost'}",
                port,
                int(v.get("rabbitmq_cluster_management_port", MANAGEMENT_PORT)) + k,
                dist + k,
                ctl,
                ctl + CTL_PORTS - 1,
                f"{base}/{port}",
                n > 1,
            )
        )
    return nodes


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def url(nodes: list[Node], password: str) -> str:
    """Celery's failover list of the cluster: every node's AMQP URL, joined by ``;``."""
    return ";".join(f"amqp://{USER}:{password}@{_host(n.address)}:{n.port}//" for n in nodes)


def cookie(password: str) -> str:
    """The nodes' Erlang cookie: from the cluster's password, as roles/rabbitmq_cluster derives it
    (``password ~ ':erlang-cookie' | hash('sha256')``), so a restart on a host needs no other secret."""
    return hashlib.sha256(f"{password}:erlang-cookie".encode()).hexdigest()


def node_env(node: Node | Mapping[str, Any], password: str) -> dict[str, str]:
    """The environment of every command on ``node`` (rabbitmq-server, rabbitmqctl), as
    roles/rabbitmq's ``__rabbitmq_env`` with the cluster's variables."""
    n = node if isinstance(node, Mapping) else asdict(node)
    base = n["dir"]
    env = {
        "RABBITMQ_NODENAME": n["name"],
        "RABBITMQ_MNESIA_BASE": f"{base}/mnesia",
        "RABBITMQ_LOG_BASE": f"{base}/log",
        "RABBITMQ_CONFIG_FILE": f"{base}/rabbitmq.conf",
        "RABBITMQ_ENABLED_PLUGINS_FILE": f"{base}/enabled_plugins",
        "RABBITMQ_PID_FILE": f"{base}/rabbitmq.pid",
        "RABBITMQ_DIST_PORT": str(n["dist_port"]),
        "RABBITMQ_CTL_DIST_PORT_MIN": str(n["ctl_port_min"]),
        "RABBITMQ_CTL_DIST_PORT_MAX": str(n["ctl_port_max"]),
        "RABBITMQ_ERLANG_COOKIE": cookie(password),
    }
    if n["longname"]:  # reached from other hosts: none of the host's own RabbitMQ's settings (its
        # rabbitmq-env.conf may bind epmd and the distribution to loopback; roles/rabbitmq's vars)
        env.update(RABBITMQ_USE_LONGNAME="true", RABBITMQ_CONF_ENV_FILE="/dev/null")
    return env


def password_of(broker_url: str) -> str:
    """The cluster's password, from its URL (every node's carries it)."""
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(broker_url.split(";", 1)[0]).password or "")


class RabbitMQCluster(RabbitMQ):
    """RabbitMQ's server, reached through the failover list: Celery's connections move on to the
    next node by kombu; cmx's own raw clients (pika) take the first node."""

    name, product = RABBITMQ_CLUSTER, "RabbitMQ cluster"
    schemes = MappingProxyType({"amqp": PORT, "amqps": PORT, "pyamqp": PORT})
    url_form = ""  # its URL lists every node: provisioned_url
    spread = True
    variables = VARIABLES
    parts = ()  # its management APIs are its own nodes' (provisioned: secrets)
    secret_names = (API_ENV,)
    api_env = API_ENV
    # A node killed and started again is the cluster's fault (kill_broker_node); the cluster as a
    # whole is not restarted, and a cut would drop one node of several.
    restartable = partitionable = False
    node_loss = True
    local = ()  # each sweep that uses one provisions it, on loopback too (roles/rabbitmq_cluster)

    def takes_url(self, url: str) -> bool:
        """A URL the inventory gives serves the cluster only as a list of its nodes' URLs (``;``)."""
        return super().takes_url(url) and ";" in url

    def raw_client(self, url, queue, name, queue_arguments, durable, prefetch):
        return super().raw_client(url.split(";", 1)[0], queue, name, queue_arguments, durable, prefetch)

    def probe(self, role: str, run_id: str | None) -> ConnectionProbe:
        return rabbitmq_probe(role, self.name, run_id, API_ENV)

    def provisioned_url(self, hosts: Hosts, group: str, db: int) -> str:
        return url(layout(group_hosts(hosts, group)), hosts.password(self.name))

    def provision_vars(self, hosts: Hosts) -> dict[str, Any]:
        """The role's ``rabbitmq_cluster_layout``: every node, where and how it runs."""
        return {f"{self.name}_layout": [asdict(n) for n in layout(group_hosts(hosts))]}

    def secrets(self, hosts: Hosts) -> dict[str, str]:
        """Every node's management API (the cluster the sweep provisions; none for one given by URL)."""
        given = hosts.given_url("brokers", "broker_url", tuple(self.schemes))
        if not hosts.hosts_of("brokers") or (given and self.takes_url(given)):
            return {API_ENV: ""}
        password = hosts.password(self.name)
        return {
            API_ENV: ";".join(
                f"http://{USER}:{password}@{_host(n.address)}:{n.management_port}" for n in layout(group_hosts(hosts))
            )
        }

    def node_places(self, hosts: Hosts) -> list[dict[str, Any]]:
        return [asdict(n) for n in layout(group_hosts(hosts))]

    def place_of(self, host, hostvars, provisioned):
        self._none("restart of the whole cluster (its fault is the loss of one node)")

    def restart(self, place, timeout: float = 60.0) -> float:
        self._none("restart of the whole cluster (its fault is the loss of one node)")

    def kill_node(self, node: Mapping[str, Any], url: str, restart_s: float, timeout: float) -> int:
        """The node's pid (its pid file, as roles/rabbitmq starts it), SIGKILLed; once it is gone
        and ``restart_s`` passed, ``rabbitmq-server -detached`` in the node's environment, and
        ``await_startup``: it rejoins the cluster by itself."""
        env = node_env(node, password_of(url))
        pid = read_pid(env["RABBITMQ_PID_FILE"])
        if pid is None or not alive(pid):
            raise RestartError(f"node {node['name']} of the cluster is not running (no live pid in its pid file)")
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while alive(pid):
            if time.monotonic() > deadline:
                raise RestartError(f"node {node['name']} (pid {pid}) still runs after SIGKILL")
            time.sleep(0.02)
        time.sleep(restart_s)
        run(["rabbitmq-server", "-detached"], timeout / 2, env)
        while True:  # booted: its listeners are up, it is in the cluster again
            try:
                run(["rabbitmqctl", "-q", "-n", str(node["name"]), "await_startup", "--timeout", "5"], 30, env)
                return pid
            except RestartError:
                if time.monotonic() > deadline + restart_s:
                    raise
                time.sleep(0.5)

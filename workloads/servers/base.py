"""The one interface every server cmx talks to implements, and the helpers its modules share.

A server (Redis, RabbitMQ, PostgreSQL) is one module of this package, registered under its
service name (workloads/vocab/services.py) in :mod:`.registry`. What differs between servers
lives there and nowhere else. Its facts: URL schemes and default port, the URL of the server a
sweep provisions, whether it is spread over its group's hosts, the inventory variables it reads,
its capabilities (restartable, failover, partitionable...). Its behaviour: how the preflight
pings it, what version it runs, the Celery settings that name the run's clients and prefix its
keys, the fast publisher and the raw client of a broker, the green-pool wake-up after the
workers consumed, the restart of a server cmx provisioned (a fault). Its controller hooks: the
URL of the server a sweep provisions, the provisioning play's variables, the secrets a run's
processes get, the parts doctor checks. Callers ask :func:`cmx.workloads.servers.registry.get`
by name; an unknown name is an error, never another server's branch.

This room imports only the vocabulary (and, inside its methods, the servers' client libraries):
the drive, the app factory, the host tools and the controller all read it, and it ships to hosts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Protocol

from cmx.workloads.vocab.queues import CLASSIC

from .process import RestartError, alive, read_pid, run, stop_pid, wait_port  # noqa: F401 (the servers' helpers)

#: Placeholder task id of a fast publisher's template message: replaced in each copy.
TEMPLATE_ID = "cmx-template-task-id"
#: Where the batch's send time goes, just before it is written.
SENT_TOKEN = "@@CMX-SENT-AT@@"

_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}


def new_ids(k: int) -> list[str]:
    """``k`` random version-4 UUIDs as strings, as ``str(uuid.uuid4())`` makes them, from one
    ``os.urandom`` call: a fifth of the cost of ``uuid4()`` each, which was a third of the
    publisher's time per message."""
    h = os.urandom(16 * k).hex()
    return [
        f"{h[i : i + 8]}-{h[i + 8 : i + 12]}-4{h[i + 13 : i + 16]}-"
        f"{_VARIANT[h[i + 16]]}{h[i + 17 : i + 20]}-{h[i + 20 : i + 32]}"
        for i in range(0, 32 * k, 32)
    ]


#: A fast publisher's capture of the one message ``apply_async`` would send:
#: (channel, name of the channel method to catch) → [(args, kwargs)] (workloads/drive/publisher.py).
Capture = Callable[[Any, str], list]


@dataclass(frozen=True)
class Place:
    """Where a server cmx provisioned lives on its host, as its role lays it out (roles/<service>/
    defaults and vars): its directory (``redis_dir``, ``rabbitmq_base_dir``, ``postgres_data_dir``),
    its port, and the role's names for it (``unit``: Redis's systemd unit; ``node``: RabbitMQ's
    node name). ``env``: more of the server's environment (a test node's distribution port)."""

    dir: str
    port: int
    unit: str | None = None
    node: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LocalService:
    """How the controller's own machine runs this server for its local sweeps (``cmx services
    up``, doctor's fixes: engine/hosts/localservices.py), from Debian's packages, on loopback."""

    name: str
    #: The vocab.services name whose URLs it serves (None: a part of a server, its management API).
    kind: str | None
    port: int
    binary: str
    package: str
    #: Seconds it may take to answer once started.
    wait_s: int
    start: Callable[[], list[list[str]]]


@dataclass(frozen=True)
class Part:
    """A part of a server the controller reaches besides its URL, given by an inventory variable of
    the ``brokers`` host (RabbitMQ's management API): what ``cmx doctor`` checks."""

    #: How doctor's line names it.
    label: str
    #: The inventory variable giving its URL.
    var: str
    #: What a sweep does without it when the server is the user's (given by URL): doctor's warning.
    without: str
    #: Raises unless the part at the URL answers (bounded).
    check: Callable[[str], None]


class Hosts(Protocol):
    """What a server's controller hooks read of the sweep's inventory (engine/hosts/inventory.py's
    ``Inventory``): its groups, each host's variables and address, the servers' passwords."""

    hostvars: Mapping[str, Mapping[str, Any]]

    def hosts_of(self, group: str) -> tuple[str, ...]: ...

    def address(self, host: str) -> str: ...

    def password(self, service: str) -> str: ...

    def given_url(self, group: str, var: str, schemes: tuple[str, ...]) -> str | None: ...


@dataclass(frozen=True)
class RunNames:
    """Every name on a server that belongs to one run."""

    run_id: str
    #: Queues that are also exchanges of the same name (Celery declares one per queue).
    queues: tuple[str, ...]
    #: Queues without an exchange of their own (the raw baseline's).
    other_queues: tuple[str, ...] = ()
    #: Tasks whose results to remove one by one (those a host's workers ran): a database backend's
    #: rows carry no run id. Empty: remove by the run's names and prefixes.
    task_ids: tuple[str, ...] = ()
    #: The database backend's table of task results (Celery's ``database_table_names``).
    result_table: str = "celery_taskmeta"

    @property
    def prefix(self) -> str:
        return f"cmx.{self.run_id}"

    def owns(self, name: str) -> bool:
        """A queue, exchange or key of this run: its prefix (then the end, a dot, or kombu's
        priority separator), or a control queue of its workers."""
        return (
            re.match(re.escape(self.prefix) + r"($|[.\x06])", name) is not None
            or name.startswith(f"cmx-{self.run_id}@")
            or name in self.other_queues
        )


class Server:
    """One server's behaviour. Subclasses set :attr:`name` (a vocab.services name) and
    :attr:`product`, and implement what their server supports; what it does not raises
    :class:`NotImplementedError` naming the server."""

    name: str = ""
    #: How messages and reports spell the product ("Redis").
    product: str = ""

    # -- its facts -------------------------------------------------------------------------------
    #: URL scheme → the port a URL without one means; the first is cmx's own server's port.
    schemes: Mapping[str, int] = MappingProxyType({})
    #: The URL of the server cmx provisions, from ``password``, ``address``, ``port`` and ``db``.
    url_form: str = ""
    #: A set of servers over every host of its group (:meth:`provisioned_url` lays it out), not one
    #: server on the group's first host.
    spread: bool = False
    #: The server itself deletes a queue left unused for its ``x-expires`` (RabbitMQ), at no cost
    #: per message. kombu emulates it on Redis with PEXPIREs on every message sent and received
    #: (a third of the consume rate): there the run's keys expire by workloads/host/leftovers.py's
    #: keeper instead, refreshed while the run lives.
    expires_queues: bool = False
    #: The inventory variables it reads besides ``<name>_password`` and ``<name>_port``, each with
    #: its type (engine/hosts/invvars.py: url, urls, port, secret, text, flag).
    variables: Mapping[str, str] = MappingProxyType({})
    #: The role's parameters the services plays give it (engine/hosts/playbooks/services*.yml),
    #: Jinja over the host's work dir ``__cmx_workdir`` (engine/hosts/playbooks/vars/cmx.yml).
    role_vars: Mapping[str, str] = MappingProxyType({})
    #: Parts the controller reaches besides its URL (doctor checks them).
    parts: tuple[Part, ...] = ()
    #: The environment variables a run's processes get from :meth:`secrets` (empty for other servers).
    secret_names: tuple[str, ...] = ()

    # -- its capabilities ------------------------------------------------------------------------
    #: ``restart_broker`` can stop and start it (:meth:`place_of`, :meth:`restart`).
    restartable: bool = False
    #: ``failover_broker`` can fail its master over (a replicated set).
    failover: bool = False
    #: ``partition_worker`` can cut a worker off from it (one address and port to drop).
    partitionable: bool = False
    #: As a broker it redelivers a message not acknowledged within kombu's ``visibility_timeout``
    #: (a task scheduled further ahead runs twice: a pitfall).
    visibility_timeout: bool = False
    #: As a broker it sends connection heartbeats (``broker_heartbeat``; a pitfall under green pools).
    heartbeats: bool = False
    #: As a broker, a green pool's worker (no event loop: Celery's ``synloop``) that holds as many
    #: unacknowledged messages as its prefetch limit reads nothing more until its 2 s wait for the
    #: broker ends, however soon a task finishes: kombu's transport sends its next read only at the
    #: start of a wait, and only while the limit allows one (a pitfall: one task per 2 s at
    #: concurrency 1, prefetch 1; experiments/pitfalls/green-one-slot.yaml).
    green_waits_at_limit: bool = False
    #: ``kill_broker_node`` can kill one of its nodes and start it again (a cluster the sweep
    #: provisioned: :meth:`node_places`, :meth:`kill_node`).
    node_loss: bool = False
    #: The types its queues can have (the ``queue_type`` dimension's values it takes:
    #: workloads/vocab/queues.py); the first is what a queue without ``x-queue-type`` is.
    queue_types: tuple[str, ...] = (CLASSIC,)

    #: How this machine runs it for local sweeps: the server first, then any part of it.
    local: tuple[LocalService, ...] = ()

    @property
    def default_port(self) -> int:
        """The port cmx's own server listens on, unless the inventory's ``<name>_port`` says otherwise."""
        return next(iter(self.schemes.values()))

    @property
    def port_var(self) -> str:
        return f"{self.name}_port"

    @property
    def password_var(self) -> str:
        return f"{self.name}_password"

    @property
    def password_env(self) -> str:
        """How its password reaches its role: the controller's environment (CMX_<SERVICE>_PASSWORD)."""
        return f"CMX_{self.name.upper()}_PASSWORD"

    @property
    def inventory_variables(self) -> dict[str, str]:
        """Every inventory variable it reads, with its type."""
        return {self.password_var: "secret", self.port_var: "port", **self.variables}

    def _none(self, what: str):
        raise NotImplementedError(f"{self.product} has no {what} in cmx")

    # -- the controller: provisioning ----------------------------------------------------------------
    def provision_hosts(self, group_hosts: tuple[str, ...]) -> tuple[str, ...]:
        """The hosts of its group a sweep starts it on: the first, or every one of a spread set."""
        return tuple(group_hosts) if self.spread else tuple(group_hosts[:1])

    def provisioned_url(self, hosts: Hosts, group: str, db: int) -> str:
        """The URL of the server a sweep provisions on ``group``'s hosts (``db``: the kind's
        database number): on the group's first host, at its ``<name>_port`` or the default."""
        host = hosts.hosts_of(group)[0]
        port = int(hosts.hostvars.get(host, {}).get(self.port_var, self.default_port))
        return self.url_form.format(password=hosts.password(self.name), address=hosts.address(host), port=port, db=db)

    def provision_vars(self, hosts: Hosts) -> dict[str, Any]:
        """More variables its role gets when a sweep starts it (a spread set's layout)."""
        return {}

    def takes_url(self, url: str) -> bool:
        """Whether a URL the inventory gives serves this server: its scheme is one of
        :attr:`schemes` (a cluster asks more: the list of its nodes)."""
        return url.split("://", 1)[0] in self.schemes

    def node_places(self, hosts: Hosts) -> list[dict[str, Any]]:
        """Where each node of the set the sweep provisions lives (a :attr:`node_loss` fault's
        target; its ``host`` key: the inventory host it runs on); none for a single server."""
        return []

    def secrets(self, hosts: Hosts) -> dict[str, str]:
        """The run's processes' environment besides the URLs when a run's broker is this server
        (keys: :attr:`secret_names`): never on a command line or in a file."""
        return {}

    # -- the controller --------------------------------------------------------------------
    def ping(self, url: str, timeout: float) -> None:
        """Raise unless the server at ``url`` answers within ``timeout`` (the preflight)."""
        self._none("preflight ping")

    # -- the app factory ---------------------------------------------------------------------
    def celery_broker(self, url: str) -> tuple[str, dict[str, Any]]:
        """Celery's ``broker_url`` for this server reached at ``url`` (the inventory's), and the
        ``broker_transport_options`` it needs besides (a Sentinel set's master name)."""
        return url, {}

    def celery_backend_url(self, url: str) -> str:
        """Celery's ``result_backend`` for this server reached at ``url`` (the inventory's)."""
        return url

    def client_name_settings(self, target: str, name: str, conf: Mapping[str, Any]) -> dict[str, Any]:
        """The Celery settings that make a client of this server for ``target`` call itself
        ``name`` (workloads/vocab/clientname.py), merged into what ``conf`` holds."""
        raise ValueError(f"no client name for a {self.name} {target}")

    def run_key_settings(self, target: str, prefix: str, conf: Mapping[str, Any]) -> dict[str, Any]:
        """The Celery settings that make every key a run's client writes start with ``prefix``
        (workloads/host/leftovers.py removes them): none unless the server keeps such keys."""
        return {}

    # -- the driver ---------------------------------------------------------------------------
    def broker_version(self, conn) -> str:
        """Product and version of the broker a connected kombu ``conn`` reaches."""
        self._none("broker version")

    def backend_version(self, app) -> str:
        """Product and version of the app's result backend, asked the way the driver reaches it."""
        self._none("backend version")

    def fast_publisher(self, app, capture: Capture, stream: bool):
        """A publisher of copies of the captured message: ``send(ids, intended) -> sent_at``,
        ``close()`` (workloads/drive/publisher.py)."""
        self._none("fast publisher")

    def raw_client(
        self, url: str, queue: str, name: str, queue_arguments: Mapping[str, Any], durable: bool, prefetch: int
    ):
        """The broker's own client for ``via: raw`` (workloads/catalog/throughput_raw.py): ``reset()``,
        ``sender(batched) -> (send, flush)``, ``consume(handle, done, poll_s)``, ``close()``."""
        self._none("raw client")

    def queue_depth(self, conn, queue: str) -> int:
        """Messages ready in ``queue`` now (not those the workers prefetched), asked on a connected
        kombu ``conn``; raises when the server has no such queue."""
        return conn.default_channel.queue_declare(queue, passive=True).message_count

    def queue_type(self, conn, queue: str, arguments: Mapping[str, Any]) -> tuple[str, str]:
        """The type the server itself gives ``queue`` (declared with ``arguments``), read back on a
        connected kombu ``conn``, and how it was read: (``classic``/``quorum``, source)."""
        self._none("queue types")

    def wake_consumers(self, app, client_name: str) -> int:
        """After the run's workers confirmed consuming: make each poll the run's queue now.
        Returns how many were woken (-1: could not ask); 0 where the server needs nothing."""
        return 0

    # -- the host ----------------------------------------------------------------------------
    def probe(self, role: str, run_id: str | None):
        """The connection probe counting the run's clients of this server as ``role`` (broker,
        backend): a :class:`cmx.workloads.servers.probes.ConnectionProbe`."""
        self._none("connection probe")

    def remove_run(self, target: str, url: str, names: RunNames) -> int:
        """Remove what the run (``names``) created on this server as ``target``; how many went
        (workloads/host/leftovers.py)."""
        self._none("removal of a run's leftovers")

    def keep_expiring(self, target: str, url: str, names: RunNames, ttl_s: float) -> int:
        """Set a TTL on what the run has here, for a server that expires nothing of a run by
        itself; how many got it. None by default (RabbitMQ's queues carry ``x-expires``)."""
        return 0

    # -- the host (a fault) -------------------------------------------------------------------------
    def place_of(self, host: str, hostvars: Mapping[str, Any], provisioned: bool) -> dict[str, Any]:
        """Where this server lives on broker host ``host``, for :meth:`restart` (a :class:`Place`'s
        fields but ``port``, which the run's URL gives; no ``dir``: the host's work dir's
        ``<service>``): as its role lays it out from the inventory's ``hostvars`` and the role's
        defaults when the sweep ``provisioned`` it, else (a ``cmx_disposable`` server given by URL)
        from the vars the inventory must give. Raises ValueError saying which vars are missing."""
        self._none("restart")

    def fail_over(self, url: str, timeout_s: float):
        """Fail the master of the set at ``url`` over (a server declaring :attr:`failover`), bounded;
        RuntimeError when it does not happen in time."""
        self._none("failover")

    def kill_node(self, node: Mapping[str, Any], url: str, restart_s: float, timeout: float) -> int:
        """SIGKILL ``node`` (one of :meth:`node_places`) on this host, start it again ``restart_s``
        later as its role does and return its old pid once it booted (``url``: the run's broker
        URL, for the set's secret). Raises :class:`RestartError` past ``timeout``."""
        self._none("nodes to kill")

    def restart(self, place: Place, timeout: float = 60.0) -> float:
        """Stop the server its role provisioned at ``place`` and start it again as its role does,
        on this host; returns once it accepts connections again, the seconds it was down.
        Raises :class:`RestartError` when it does not stop or come back within ``timeout``."""
        self._none("restart")

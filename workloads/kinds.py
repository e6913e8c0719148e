"""Broker and backend kinds, and the servers they run on: the one table everything else reads.

A *kind* is what an experiment's ``broker`` or ``backend`` dimension names (``rabbitmq-quorum``,
``rpc``); a *service* is the server a kind talks to (``rabbitmq``), which is also the name of the
Ansible role that provisions it, of its inventory variables (``<service>_password``,
``<service>_port``), of its controller secret (``CMX_<SERVICE>_PASSWORD``), of the playbook's
host list (``cmx_<service>_hosts``) and of its connection probe (workloads/host/connprobes.py).

Readers: the inventory (URL schemes, the URL of a provisioned server, what can be provisioned),
provisioning (role and secret per service), the runner (what to watch and count), the probes,
the app factory (queue arguments, the backend's Celery URL), the servers (workloads/servers/).

To add a kind on an existing server: an entry in BROKERS or BACKENDS. To add a server: its name in
workloads/vocab/services.py and an entry in SERVICES here (the vocabulary), its module in
workloads/servers/ (what it does), its role (roles/) and the plays that run it
(docs/architecture.md). Standard library only: shipped to every host.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from cmx.workloads.vocab.services import POSTGRES, RABBITMQ, REDIS, REDIS_SENTINEL


@dataclass(frozen=True)
class Service:
    """A server cmx talks to, counts the clients of, and can start itself (its role)."""

    name: str
    #: URL scheme → the port a URL without one means.
    schemes: Mapping[str, int]
    #: The URL of the server cmx provisions, from ``password``, ``address``, ``port`` and ``db``.
    url_form: str
    #: The server itself deletes a queue left unused for its ``x-expires`` (RabbitMQ), at no cost
    #: per message. kombu emulates it on Redis with PEXPIREs on every message sent and received
    #: (a third of the consume rate): there the run's keys expire by workloads/host/leftovers.py's
    #: keeper instead, refreshed while the run lives.
    expires_queues: bool = False
    #: A set of servers over every host of its group (workloads/servers/redis_sentinel.py lays it
    #: out and makes its URL), not one server on the group's first host.
    spread: bool = False

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
        return f"CMX_{self.name.upper()}_PASSWORD"


def _frozen(mapping: dict) -> Mapping:
    return MappingProxyType(mapping)


SERVICES: Mapping[str, Service] = _frozen({s.name: s for s in (
    Service(REDIS, _frozen({"redis": 6379, "rediss": 6379}),
            "redis://:{password}@{address}:{port}/{db}"),
    Service(RABBITMQ, _frozen({"amqp": 5672, "amqps": 5671, "pyamqp": 5672}),
            "amqp://cmx:{password}@{address}:{port}//", expires_queues=True),
    Service(POSTGRES, _frozen({"postgresql": 5432, "postgres": 5432, "db+postgresql": 5432}),
            "postgresql://postgres:{password}@{address}:{port}/postgres"),
    # One master, one replica, three sentinels (roles/redis_sentinel); its port is the first
    # sentinel's, ``redis_sentinel_redis_port`` the first Redis server's.
    Service(REDIS_SENTINEL, _frozen({"sentinel": 26379}), "", spread=True),
)})


@dataclass(frozen=True)
class Kind:
    """A value of the ``broker`` or ``backend`` dimension."""

    name: str
    #: The server it needs (a SERVICES name); None when it has none of its own (``none``, ``rpc``).
    service: str | None
    #: Whether a sweep starts the server itself where the inventory gives no URL for the kind.
    provisionable: bool = True
    #: Broker: ``queue_arguments`` of the run's queues.
    queue_arguments: Mapping[str, Any] = field(default_factory=lambda: _frozen({}))
    #: Backend without a server: Celery's ``result_backend`` (``rpc://``), or None (no backend).
    celery_url: str | None = None
    #: Redis: the database number cmx's own server gives this target.
    db: int = 0


BROKERS: Mapping[str, Kind] = _frozen({k.name: k for k in (
    Kind(REDIS, REDIS, db=0),
    Kind(RABBITMQ, RABBITMQ),
    Kind("rabbitmq-quorum", RABBITMQ, queue_arguments=_frozen({"x-queue-type": "quorum"})),
    Kind("redis-sentinel", REDIS_SENTINEL, db=0),
)})
BACKENDS: Mapping[str, Kind] = _frozen({k.name: k for k in (
    Kind("none", None, provisionable=False),
    Kind(REDIS, REDIS, db=1),
    Kind("rpc", None, provisionable=False, celery_url="rpc://"),
    Kind(POSTGRES, POSTGRES),
)})
#: What the run's clients talk to: its broker and its result backend.
TARGETS: Mapping[str, Mapping[str, Kind]] = _frozen({"broker": BROKERS, "backend": BACKENDS})


def service_of(target: str, name: str) -> Service | None:
    """The server kind ``name`` of ``target`` talks to, None if it has none of its own."""
    service = TARGETS[target][name].service
    return SERVICES[service] if service else None


def schemes(target: str, name: str) -> tuple[str, ...]:
    """The URL schemes that serve kind ``name`` of ``target`` (none for kinds without a server)."""
    service = service_of(target, name)
    return tuple(service.schemes) if service else ()


def default_port(scheme: str) -> int | None:
    """The port a URL of ``scheme`` without one reaches, None for a scheme no service has."""
    return next((s.schemes[scheme] for s in SERVICES.values() if scheme in s.schemes), None)


def provisioned_url(target: str, name: str, password: str, address: str, port: int) -> str:
    """The URL of the server a sweep provisions for kind ``name`` of ``target``."""
    k = TARGETS[target][name]
    return SERVICES[k.service].url_form.format(password=password, address=address, port=port, db=k.db)


def service_of_scheme(scheme: str) -> Service:
    """The server a URL of ``scheme`` reaches; an unknown scheme is an error (never another
    server's)."""
    for service in SERVICES.values():
        if scheme in service.schemes:
            return service
    raise ValueError(f"no server of cmx takes {scheme}:// URLs")

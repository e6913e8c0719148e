"""Broker and backend kinds, and the servers they run on: the one table everything else reads.

A *kind* is what an experiment's ``broker`` or ``backend`` dimension names (``rabbitmq-quorum``,
``rpc``); a *service* is the server a kind talks to (``rabbitmq``), which is also the name of the
Ansible role that provisions it, of its inventory variables (``<service>_password``,
``<service>_port``), of its controller secret (``CMX_<SERVICE>_PASSWORD``), of the playbook's
host list (``cmx_<service>_hosts``) and of its connection probe (workloads/host/connprobes.py).

Readers: the inventory (URL schemes, the URL of a provisioned server, what can be provisioned),
provisioning (role and secret per service), the runner (what to watch and count), the probes,
the app factory (queue arguments, the backend's Celery URL, how clients name themselves).

To add a kind on an existing server: an entry in BROKERS or BACKENDS. To add a server: an entry
in SERVICES, its probe in connprobes.py, its remover in leftovers.py, its naming in
:func:`client_name_settings`, and a role
(docs/architecture.md). Standard library only: shipped to every host.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping


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
    #: The wire protocol its clients speak (``redis`` for a Sentinel set's master too): what the
    #: fast publisher, the raw baseline, the wake-up and the pitfalls go by.
    protocol: str = ""
    #: A set of servers over every host of its group (workloads/sentinel.py), not one server on the first.
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
    Service("redis", _frozen({"redis": 6379, "rediss": 6379}),
            "redis://:{password}@{address}:{port}/{db}", protocol="redis"),
    Service("rabbitmq", _frozen({"amqp": 5672, "amqps": 5671, "pyamqp": 5672}),
            "amqp://cmx:{password}@{address}:{port}//", expires_queues=True, protocol="amqp"),
    Service("postgres", _frozen({"postgresql": 5432, "postgres": 5432, "db+postgresql": 5432}),
            "postgresql://postgres:{password}@{address}:{port}/postgres", protocol="postgres"),
    # One master, one replica, three sentinels (roles/redis_sentinel); its port is the first
    # sentinel's, ``redis_sentinel_redis_port`` the first Redis server's. URL: workloads/sentinel.py.
    Service("redis_sentinel", _frozen({"sentinel": 26379}), "", protocol="redis", spread=True),
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
    Kind("redis", "redis", db=0),
    Kind("rabbitmq", "rabbitmq"),
    Kind("rabbitmq-quorum", "rabbitmq", queue_arguments=_frozen({"x-queue-type": "quorum"})),
    Kind("redis-sentinel", "redis_sentinel", db=0),
)})
BACKENDS: Mapping[str, Kind] = _frozen({k.name: k for k in (
    Kind("none", None, provisionable=False),
    Kind("redis", "redis", db=1),
    Kind("rpc", None, provisionable=False, celery_url="rpc://"),
    Kind("postgres", "postgres"),
)})
#: What the run's clients talk to: its broker and its result backend.
TARGETS: Mapping[str, Mapping[str, Kind]] = _frozen({"broker": BROKERS, "backend": BACKENDS})


def protocol_of(target: str, name: str) -> str | None:
    """The wire protocol of kind ``name`` of ``target``'s server (``redis``, ``amqp``...), None without one."""
    service = service_of(target, name)
    return service.protocol if service else None


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


def celery_backend_url(name: str, url: str | None) -> str | None:
    """Celery's ``result_backend`` for backend kind ``name`` reached at ``url`` (the inventory's)."""
    k = BACKENDS[name]
    if k.service is None:
        return k.celery_url
    if k.service == "postgres":
        # Celery's database backend takes SQLAlchemy URLs; name the driver the hosts have
        # (SQLAlchemy 2.1 would pick psycopg 3 for a bare postgresql://).
        url = url.removeprefix("db+")
        for bare in ("postgresql://", "postgres://"):
            if url.startswith(bare):
                url = "postgresql+psycopg2://" + url[len(bare):]
        return "db+" + url
    return url


def libpq_url(url: str) -> str:
    """A PostgreSQL URL as libpq (psycopg2) takes it: Celery spells it db+postgresql[+driver]://."""
    scheme, sep, rest = url.removeprefix("db+").partition("://")
    return scheme.split("+")[0] + sep + rest


def client_name_settings(service: str, target: str, name: str, conf: Mapping[str, Any]) -> dict[str, Any]:
    """The Celery settings that make a client of ``service`` for ``target`` call itself ``name``
    (workloads/clientname.py), merged into what ``conf`` (the app's settings so far) holds:
    Redis ``CLIENT SETNAME``, AMQP's ``connection_name`` client property, PostgreSQL's
    ``application_name``."""
    if target == "broker":
        opts = dict(conf.get("broker_transport_options") or {})
        if SERVICES[service].protocol == "redis":
            opts["client_name"] = name
        elif service == "rabbitmq":  # py-amqp takes client_properties through kombu's transport options
            opts["client_properties"] = {**(opts.get("client_properties") or {}), "connection_name": name}
        else:
            raise ValueError(f"no client name for a {service} broker")
        return {"broker_transport_options": opts}
    if service == "redis":
        return {"redis_client_name": name}
    if service == "postgres":
        engine = dict(conf.get("database_engine_options") or {})
        engine["connect_args"] = {**(engine.get("connect_args") or {}), "application_name": name}
        return {"database_engine_options": engine}
    raise ValueError(f"no client name for a {service} backend")


def run_key_settings(service: str, target: str, prefix: str, conf: Mapping[str, Any]) -> dict[str, Any]:
    """The Celery settings that make every key a run's client writes on ``service`` for ``target``
    start with ``prefix``, merged into what ``conf`` holds, so the run's end (and nothing else)
    removes them (workloads/host/leftovers.py): a Redis backend's result keys. Nothing elsewhere:
    queue and exchange names carry the run's id already, and a PostgreSQL backend's rows have
    no key to prefix."""
    if target == "backend" and service == "redis":
        opts = dict(conf.get("result_backend_transport_options") or {})
        opts["global_keyprefix"] = prefix
        return {"result_backend_transport_options": opts}
    return {}

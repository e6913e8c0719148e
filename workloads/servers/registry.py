"""Every server by its service name: ``registry.get(name)``, and what callers ask of the servers
as a whole: which server a broker or backend kind needs, which serves a URL scheme, the
variables, secrets and capabilities they declare. Adding a server is one module and one line in
:data:`SERVERS` (its name in workloads/vocab/services.py, its role in roles/)."""

from __future__ import annotations

from cmx.workloads.vocab import kinds
from cmx.workloads.vocab.queues import QUORUM
from cmx.workloads.vocab.services import SERVICE_NAMES

from .base import Hosts, Part, Place, RestartError, Server
from .postgresql import PostgreSQL, libpq_url
from .rabbitmq import RabbitMQ
from .rabbitmq_cluster import RabbitMQCluster
from .redis import Redis
from .redis_sentinel import RedisSentinel

#: Every server by its service name.
SERVERS: dict[str, Server] = {
    s.name: s for s in (Redis(), RabbitMQ(), PostgreSQL(), RedisSentinel(), RabbitMQCluster())
}
assert tuple(SERVERS) == SERVICE_NAMES, "a server of the vocabulary has no module (or the reverse)"

__all__ = [
    "Hosts",
    "Part",
    "Place",
    "RestartError",
    "SERVERS",
    "Server",
    "default_port",
    "get",
    "libpq_url",
    "of_scheme",
    "queue_type_problem",
    "schemes",
    "service_of",
    "takes_url",
    "with_capability",
]


def get(name: str | None) -> Server:
    """The server named ``name``; an unknown name is an error, never another server's branch."""
    try:
        return SERVERS[name]
    except KeyError:
        raise ValueError(f"unknown server {name!r} (cmx knows {', '.join(SERVERS)})") from None


def service_of(target: str, name: str) -> Server | None:
    """The server kind ``name`` of ``target`` (broker, backend) talks to, None if it has none of its own."""
    service = kinds.TARGETS[target][name].service
    return SERVERS[service] if service else None


def schemes(target: str, name: str) -> tuple[str, ...]:
    """The URL schemes that serve kind ``name`` of ``target`` (none for kinds without a server)."""
    server = service_of(target, name)
    return tuple(server.schemes) if server else ()


def default_port(scheme: str) -> int | None:
    """The port a URL of ``scheme`` without one reaches, None for a scheme no server has."""
    return next((s.schemes[scheme] for s in SERVERS.values() if scheme in s.schemes), None)


def of_scheme(scheme: str) -> Server:
    """The server a URL of ``scheme`` reaches; an unknown scheme is an error (never another server's)."""
    for server in SERVERS.values():
        if scheme in server.schemes:
            return server
    raise ValueError(f"no server of cmx takes {scheme}:// URLs")


def takes_url(target: str, name: str, url: str) -> bool:
    """Whether a URL the inventory gives serves kind ``name`` of ``target`` (its server's
    ``takes_url``: a scheme of the server's; a cluster's, the list of its nodes)."""
    server = service_of(target, name)
    return server is not None and server.takes_url(url)


def queue_type_problem(broker: str, queue_type: str, delivery_limit: int = 0) -> str | None:
    """Why a cell's ``queue_type`` (and ``delivery_limit``) cannot run on its broker, or None: a
    type its server has no queues of (its ``queue_types``), a delivery limit on other than quorum."""
    kind = kinds.BROKERS.get(broker)
    if kind is None or kind.service is None:
        return None
    if queue_type not in SERVERS[kind.service].queue_types:
        on = ", ".join(
            k.name for k in kinds.BROKERS.values() if k.service and queue_type in SERVERS[k.service].queue_types
        )
        return (
            f"queue_type {queue_type}: only a broker of {on} has {queue_type} queues (this cell's broker is {broker})"
        )
    own = kinds.queue_type_of(broker, queue_type)
    if delivery_limit and own != QUORUM:
        return (
            f"delivery_limit {delivery_limit}: x-delivery-limit is a quorum queue's (this cell's queues are "
            f"{own}: set queue_type: quorum)"
        )
    return None


def with_capability(capability: str) -> tuple[Server, ...]:
    """The servers declaring ``capability`` (an attribute of :class:`Server`: ``restartable``...)."""
    return tuple(s for s in SERVERS.values() if getattr(s, capability))

"""Every server by its service name: ``registry.get(name)``."""
from __future__ import annotations

from cmx.workloads.vocab.services import SERVICE_NAMES

from .base import Place, RestartError, Server
from .postgresql import PostgreSQL, libpq_url
from .rabbitmq import RabbitMQ
from .redis import Redis
from .redis_sentinel import RedisSentinel

#: Every server by its service name.
SERVERS: dict[str, Server] = {s.name: s for s in (Redis(), RabbitMQ(), PostgreSQL(), RedisSentinel())}
assert tuple(SERVERS) == SERVICE_NAMES, "a server of the vocabulary has no module (or the reverse)"

__all__ = ["Place", "RestartError", "SERVERS", "Server", "get", "libpq_url"]


def get(name: str | None) -> Server:
    """The server named ``name``; an unknown name is an error, never another server's branch."""
    try:
        return SERVERS[name]
    except KeyError:
        raise ValueError(f"unknown server {name!r} (cmx knows {', '.join(SERVERS)})") from None

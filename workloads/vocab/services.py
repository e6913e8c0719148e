"""The servers cmx talks to, by the name everything else keys on: the ``service`` of a broker or
backend kind (workloads/vocab/kinds.py), its module in workloads/servers/, its Ansible role (roles/),
its inventory variables and its connection probe."""

from __future__ import annotations

REDIS = "redis"
RABBITMQ = "rabbitmq"
POSTGRES = "postgres"
#: A Redis Sentinel set: one master, one replica, three sentinels (workloads/servers/redis_sentinel.py).
REDIS_SENTINEL = "redis_sentinel"
#: A RabbitMQ cluster: N nodes (3 unless the inventory says) joined with one Erlang cookie
#: (workloads/servers/rabbitmq_cluster.py).
RABBITMQ_CLUSTER = "rabbitmq_cluster"

#: Every server, in the order of the servers' registry (workloads/servers/registry.py's SERVERS).
SERVICE_NAMES: tuple[str, ...] = (REDIS, RABBITMQ, POSTGRES, REDIS_SENTINEL, RABBITMQ_CLUSTER)


def secret_prefix(service: str) -> str:
    """How the environment variables that carry a server's own secrets to a run's processes begin
    (``CMX_<SERVICE>_``: its ``secret_names`` in workloads/servers/): every reader of secrets
    (the agent, hostrun, the sampler's redaction) knows them by this form, whichever server."""
    return f"CMX_{service.upper()}_"


def is_server_secret(name: str) -> bool:
    """Whether environment variable ``name`` carries a server's secret (:func:`secret_prefix`)."""
    return name.startswith(tuple(secret_prefix(s) for s in SERVICE_NAMES))

"""The servers cmx talks to, by the name everything else keys on: the ``service`` of a broker or
backend kind (workloads/kinds.py), its module in workloads/servers/, its Ansible role (roles/),
its inventory variables and its connection probe."""
from __future__ import annotations

REDIS = "redis"
RABBITMQ = "rabbitmq"
POSTGRES = "postgres"
#: A Redis Sentinel set: one master, one replica, three sentinels (workloads/servers/redis_sentinel.py).
REDIS_SENTINEL = "redis_sentinel"

#: Every server, in the order of workloads/kinds.py's SERVICES.
SERVICE_NAMES: tuple[str, ...] = (REDIS, RABBITMQ, POSTGRES, REDIS_SENTINEL)

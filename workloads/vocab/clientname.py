"""The name every cmx client of a run gives itself on the broker and the backend, read back by
the connection probes (workloads/host/sampler.py) to count only the run's own clients.

``cmx.<run_id>.<client>.<target>``: ``client`` is who opened it (``worker``, ``driver``),
``target`` the service it talks to (``broker``, ``backend``). Redis takes it through
``CLIENT SETNAME`` (kombu's ``client_name`` transport option, Celery's ``redis_client_name``,
redis-py's ``client_name``), RabbitMQ as the ``connection_name`` client property (shown as
``user_provided_name`` by the management API), PostgreSQL as ``application_name``.
Standard library only: the sampler imports it.
"""

from __future__ import annotations

CLIENTS = ("worker", "driver")
TARGETS = ("broker", "backend")


def client_name(run_id: str, client: str, target: str) -> str:
    assert client in CLIENTS and target in TARGETS, (client, target)
    return f"cmx.{run_id}.{client}.{target}"


def parse(name: str | None, run_id: str) -> tuple[str, str] | None:
    """(client, target) of a name this run gave one of its clients; None for anyone else's."""
    prefix = f"cmx.{run_id}."
    if not name or not name.startswith(prefix):
        return None
    client, sep, target = name[len(prefix) :].partition(".")
    return (client, target) if sep and client in CLIENTS and target in TARGETS else None

"""What a run created on its broker and backend, removed at its end whatever the end was.

A run's queues and exchanges are named from its id (``cmx.<run_id>``, ``.hold``, ``.raw``), its
workers' control queues from their node names (``cmx-<run_id>@HOST``), and its Redis result keys
carry the run's prefix (workloads/kinds.py ``run_key_settings``); a database backend's result rows
are removed by the ids of the tasks each host's workers ran. The driver's remote-control reply
queues are named after its threads, not the run: they are declared with a 10 s expiry (kombu's
Mailbox), auto-deleted, and their shared binding table is kombu's to sweep.

One function per server, keyed like the probes (``REMOVERS``, by SERVICES name in
workloads/kinds.py); the host's finish calls :func:`remove_run` (workloads/host/hostctl.py
``reset``), and so does the agent when its lease ends (workloads/host/agent.py). What no process
is left to remove goes through expiry: on RabbitMQ the run's queues carry ``x-expires``
(RunSpec.queue_arguments); on Redis the driver host's sampler keeps a TTL on the run's keys
(``KEEPERS``), set anew while the run lives, so they outlive a run killed whole by
``queue_expires_s`` at most; Celery's results expire by ``result_expires``.

Nothing here touches a name another run could own: every deletion is of a name built from this
run's id, or of the results of tasks this run's workers ran.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Callable, Mapping

from cmx.workloads import kinds

#: Environment variables with the URLs of the run's broker and backend (from the run's secrets).
URL_VARS = {"broker": "CMX_BROKER_URL", "backend": "CMX_BACKEND_URL"}


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
        return (re.match(re.escape(self.prefix) + r"($|[.\x06])", name) is not None
                or name.startswith(f"cmx-{self.run_id}@") or name in self.other_queues)


def names_of(spec, task_ids: tuple[str, ...] = ()) -> RunNames:
    """The run's names, from its spec."""
    table = (spec.celery.get("database_table_names") or {}).get("task", "celery_taskmeta")
    return RunNames(spec.run_id, (spec.queue, spec.hold_queue), (spec.raw_queue,), tuple(task_ids), table)


# ------------------------------------------------------------------------------------- redis
def remove_redis(target: str, url: str, names: RunNames) -> int:
    """Keys of the run: its queue lists (every priority), binding tables and their deadlines, its
    members of shared binding tables (control queues), its unacknowledged messages (kombu keeps
    them in one ``unacked`` hash per database and would restore them into the run's queue), and
    its result keys. One pass over the database's keys. Returns how many keys or members went."""
    from cmx.workloads.sentinel import redis_client

    client = redis_client(url, timeout=10)  # a Sentinel set's: its master now
    try:
        if names.task_ids:  # results by name (the prefix scan of the run's end found the rest)
            keys = [f"{names.prefix}.celery-task-meta-{t}" for t in names.task_ids] if target == "backend" else []
            return sum(client.delete(*keys[i:i + 1000]) for i in range(0, len(keys), 1000))
        removed, owned, shared = 0, [], []
        for key in client.scan_iter(count=1000):
            name = key.decode(errors="replace")
            if names.owns(_kombu_name(name)):
                owned.append(key)
            elif name.startswith("_kombu.binding"):
                shared.append(key)
        for i in range(0, len(owned), 1000):
            removed += client.delete(*owned[i:i + 1000])
        if target == "broker":
            removed += _redis_shared_tables(client, shared, names)
        return removed
    finally:
        client.close()


def _kombu_name(key: str) -> str:
    """The queue or exchange a kombu key is about (its binding tables are named after exchanges)."""
    for prefix in ("_kombu.binding.", "_kombu.binding_permanent."):
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def _redis_shared_tables(client, tables: list[bytes], names: RunNames) -> int:
    """The run's members of kombu's tables shared by every run on the database."""
    removed = 0
    sep = "\x06\x16"
    for key in tables:
        kind = client.type(key)
        if kind == b"set":  # members are routing_key SEP pattern SEP queue
            members = [m for m in client.sscan_iter(key, count=1000)
                       if names.owns(m.decode(errors="replace").split(sep)[-1])]
            if members:
                removed += client.srem(key, *members)
        elif kind == b"zset":  # _kombu.binding_deadlines: exchange → when its table expires
            # The run's, and deadlines of tables gone (a consumer's refresh re-adds one that comes back).
            members = [m for m, _ in client.zscan_iter(key, count=1000)
                       if names.owns(m.decode(errors="replace")) or not client.exists(b"_kombu.binding." + m)]
            if members:
                removed += client.zrem(key, *members)
    tags = []
    for tag, payload in client.hscan_iter("unacked", count=1000):
        try:
            _message, exchange, routing_key = json.loads(payload)
        except (ValueError, TypeError):
            continue
        if names.owns(str(exchange or "")) or names.owns(str(routing_key or "")):
            tags.append(tag)
    if tags:
        removed += client.hdel("unacked", *tags)
        client.zrem("unacked_index", *tags)
    return removed


#: kombu's Redis transport: a queue's priority lists are ``QUEUE<sep>N`` for N in these steps.
_REDIS_PRIORITY_STEPS, _REDIS_SEP = (3, 6, 9), "\x06\x16"


def keep_redis(target: str, url: str, names: RunNames, ttl_s: float) -> int:
    """A TTL of ``ttl_s`` on the run's queue lists (every priority) and binding tables, set anew at
    each call (a list emptied and filled again has lost it). Its results carry Celery's own."""
    from cmx.workloads.sentinel import redis_client

    if target != "broker":
        return 0
    keys = [k for q in (*names.queues, *names.other_queues)
            for k in (q, *[f"{q}{_REDIS_SEP}{p}" for p in _REDIS_PRIORITY_STEPS])]
    keys += [f"{table}{q}" for q in names.queues for table in ("_kombu.binding.", "_kombu.binding_permanent.")]
    client = redis_client(url, timeout=10)
    try:
        with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.expire(key, max(1, int(ttl_s)))
            return sum(bool(r) for r in pipe.execute())
    finally:
        client.close()


# ---------------------------------------------------------------------------------- rabbitmq
def remove_rabbitmq(target: str, url: str, names: RunNames) -> int:
    """The run's queues (with their messages and bindings) and its exchanges. Deleting what is
    not there is not an error (RabbitMQ answers ok). Returns how many deletions were asked."""
    from kombu import Connection

    if target != "broker" or names.task_ids:
        return 0
    asked = 0
    with Connection(url, connect_timeout=10) as conn:
        conn.ensure_connection(max_retries=3)
        channel = conn.channel()
        for what, name in ([("queue", q) for q in (*names.queues, *names.other_queues)]
                           + [("exchange", e) for e in names.queues]):
            try:
                if what == "queue":
                    channel.queue_delete(name)
                else:
                    channel.exchange_delete(name)
                asked += 1
            except conn.channel_errors:  # the broker closed the channel (an old RabbitMQ's 404): a new one
                channel = conn.channel()
        channel.close()
    return asked


# ---------------------------------------------------------------------------------- postgres
def remove_postgres(target: str, url: str, names: RunNames) -> int:
    """The results of the run's tasks, by task id (a PostgreSQL backend's rows carry no run id):
    each host removes those of the tasks its workers ran (workloads/host/hostrun.py)."""
    if target != "backend" or not names.task_ids:
        return 0
    import psycopg2
    from psycopg2 import sql

    conn = psycopg2.connect(kinds.libpq_url(url), connect_timeout=10)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", (names.result_table,))
            if cur.fetchone()[0] is None:  # no result stored yet on this database
                return 0
            cur.execute(sql.SQL("DELETE FROM {} WHERE task_id = ANY(%s)").format(sql.Identifier(names.result_table)),
                        (list(names.task_ids),))
            return cur.rowcount
    finally:
        conn.close()


#: One remover per server (SERVICES in workloads/kinds.py): (target, url, names) → how many went.
REMOVERS: Mapping[str, Callable[[str, str, RunNames], int]] = {
    "redis": remove_redis, "rabbitmq": remove_rabbitmq, "postgres": remove_postgres, "redis_sentinel": remove_redis,
}


#: Servers that expire nothing of a run by themselves: a keeper sets a TTL on what the run has
#: there, (target, url, names, ttl_s) → how many keys got it. RabbitMQ needs none (x-expires).
KEEPERS: Mapping[str, Callable[[str, str, RunNames, float], int]] = {"redis": keep_redis, "redis_sentinel": keep_redis}


def _servers(spec, targets):
    """(target, service name, url) of the run's servers among ``targets``, each URL once."""
    seen: set[tuple[str, str]] = set()
    for target, kind in targets:
        service = kinds.service_of(target, kind)
        url = os.environ.get(URL_VARS[target]) or ""
        if service is None or not url or (target, url) in seen:
            continue
        seen.add((target, url))
        yield target, service.name, url


def keep_expiring(spec) -> int:
    """Set the TTL (``spec.queue_expires_s``) on what the run has on servers that need a keeper."""
    if not spec.queue_expires_s:
        return 0
    names = names_of(spec)
    return sum(KEEPERS[service](target, url, names, spec.queue_expires_s)
               for target, service, url in _servers(spec, (("broker", spec.broker), ("backend", spec.backend)))
               if service in KEEPERS)


def remove_run(spec, task_ids: tuple[str, ...] = ()) -> dict[str, int]:
    """Remove what the run created on its broker and backend (URLs from the environment, as the
    run's processes got them); {target: how many}. With ``task_ids``: the results of those tasks
    only. Safe to call twice, and for a run that never began."""
    names = names_of(spec, task_ids)
    targets = (("backend", spec.backend),) if task_ids else (("broker", spec.broker), ("backend", spec.backend))
    return {target: REMOVERS[service](target, url, names) for target, service, url in _servers(spec, targets)}

"""Redis: as a broker (kombu's Redis transport) and as a result backend, and the server a sweep
provisions with roles/redis."""

from __future__ import annotations

import json
import os
import time
from types import MappingProxyType
from typing import Any, Mapping

from cmx.workloads.vocab.clients import BACKEND, BROKER, INTENDED_HEADER, SENT_HEADER
from cmx.workloads.vocab.services import REDIS

from .base import (
    SENT_TOKEN,
    TEMPLATE_ID,
    Capture,
    LocalService,
    Place,
    RestartError,
    RunNames,
    Server,
    new_ids,
    read_pid,
    run,
    stop_pid,
    wait_port,
)
from .probes import PROBE_TIMEOUT_S, ConnectionProbe, url_from_env


class RedisPublisher:
    """Pipelined LPUSHes of copies of the template (kombu's Redis message: JSON, base64 body)."""

    def __init__(self, app, capture: Capture, stream: bool):
        from kombu.utils.json import dumps

        self.conn = app.connection_for_write()
        channel = self.conn.default_channel
        ((args, _),) = capture(channel, "_put")
        queue, message = args[0], args[1]
        self.key = channel._q_for_pri(queue, channel._get_message_priority(message, reverse=False))
        message["properties"]["delivery_tag"] = "@@TAG@@"
        message["headers"][SENT_HEADER] = "@@SENT@@"
        if stream:
            message["headers"][INTENDED_HEADER] = "@@INTENDED@@"
        text = dumps(message).replace("%", "%%")
        if TEMPLATE_ID not in text:
            raise RuntimeError("the task id is not in the captured message")
        self.template = (
            text.replace(TEMPLATE_ID, "%(id)s")
            .replace("@@TAG@@", "%(tag)s")
            .replace('"@@SENT@@"', SENT_TOKEN)
            .replace('"@@INTENDED@@"', "%(intended)s")
        ).encode()
        self.sent_token = SENT_TOKEN.encode()
        self.client = channel.client

    def send(self, ids: list[str], intended: list[float] | None) -> float:
        # One LPUSH of the whole batch: Redis pushes its values one by one, left to right, as
        # that many LPUSHes would (the worker's BRPOP takes them in publish order), in one trip.
        # Bytes (UTF-8, as redis-py would encode them), so redis-py sends them as they are.
        tmpl, tags = self.template, new_ids(len(ids))
        built = [
            tmpl
            % {
                b"id": task_id.encode(),
                b"tag": tags[i].encode(),
                b"intended": repr(intended[i]).encode() if intended else b"",
            }
            for i, task_id in enumerate(ids)
        ]
        sent = time.time()
        stamp, token = repr(sent).encode(), self.sent_token
        self.client.lpush(self.key, *[m.replace(token, stamp) for m in built])
        return sent

    def close(self) -> None:
        self.conn.release()


def from_url(url: str, timeout: float | None, **kwargs):
    """A redis-py client of the server at ``url`` (each call: a pool of its own)."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout, **kwargs)


class RedisRaw:
    """redis-py ``LPUSH`` (pipelined for batches: ``execute`` returns once Redis answered each)
    and ``BRPOP``."""

    def __init__(self, url: str, queue: str, name: str, connect=from_url):
        self.queue = queue
        self.client = connect(url, None, client_name=name)  # counted as the run's driver
        self.pool = self.client.connection_pool

    def reset(self) -> None:
        self.client.delete(self.queue)

    def sender(self, batched: bool):
        if not batched:  # each LPUSH returns with Redis's reply: acknowledged
            return (lambda body: self.client.lpush(self.queue, body)), None
        pipe = self.client.pipeline(transaction=False)
        return (lambda body: pipe.lpush(self.queue, body)), pipe.execute

    def consume(self, handle, done, poll_s: float) -> None:
        import redis

        client = redis.Redis(connection_pool=self.pool)
        while not done.is_set():
            got = client.brpop([self.queue], timeout=poll_s)
            if got is not None:
                handle(got[1], False)

    def close(self) -> None:
        self.client.delete(self.queue)
        self.pool.disconnect()


class RedisProbe(ConnectionProbe):
    def __init__(self, role: str, kind: str, run_id: str | None, connect=from_url) -> None:
        super().__init__(role, kind, run_id)
        self._client, self._connect = None, connect

    def _connected(self):
        if self._client is None:  # redis-py lazily: only hosts that count Redis clients need it
            url = url_from_env(self.role).replace("redis+socket://", "unix://", 1)
            self._client = self._connect(url, PROBE_TIMEOUT_S)
        return self._client

    def client_names(self) -> list[str | None]:
        # Server-wide, every database: the names tell broker from backend and this run from others.
        return [c.get("name") for c in self._connected().client_list()]

    def memory(self) -> dict[str, int]:
        """``used_memory`` of ``INFO memory`` (what Redis allocated, its own count), named by the
        address reached (a Sentinel set's master: ``""``, its pool follows the master)."""
        client = self._connected()
        kwargs = client.connection_pool.connection_kwargs
        node = f"{kwargs['host']}:{kwargs.get('port', '')}" if kwargs.get("host") else kwargs.get("path", "")
        return {node: int(client.info("memory")["used_memory"])}

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


# -- a run's leftovers (workloads/host/leftovers.py) --
def remove_redis(target: str, url: str, names: RunNames, connect=from_url) -> int:
    """Keys of the run: its queue lists (every priority), binding tables and their deadlines, its
    members of shared binding tables (control queues), its unacknowledged messages (kombu keeps
    them in one ``unacked`` hash per database and would restore them into the run's queue), and
    its result keys. One pass over the database's keys. Returns how many keys or members went."""
    client = connect(url, 10)
    try:
        if names.task_ids:  # results by name (the prefix scan of the run's end found the rest)
            keys = [f"{names.prefix}.celery-task-meta-{t}" for t in names.task_ids] if target == BACKEND else []
            return sum(client.delete(*keys[i : i + 1000]) for i in range(0, len(keys), 1000))
        removed, owned, shared = 0, [], []
        for key in client.scan_iter(count=1000):
            name = key.decode(errors="replace")
            if names.owns(_kombu_name(name)):
                owned.append(key)
            elif name.startswith("_kombu.binding"):
                shared.append(key)
        for i in range(0, len(owned), 1000):
            removed += client.delete(*owned[i : i + 1000])
        if target == BROKER:
            removed += _redis_shared_tables(client, shared, names)
        return removed
    finally:
        client.close()


def _kombu_name(key: str) -> str:
    """The queue or exchange a kombu key is about (its binding tables are named after exchanges)."""
    for prefix in ("_kombu.binding.", "_kombu.binding_permanent."):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def _redis_shared_tables(client, tables: list[bytes], names: RunNames) -> int:
    """The run's members of kombu's tables shared by every run on the database."""
    removed = 0
    sep = "\x06\x16"
    types = {key: client.type(key) for key in tables}
    # Sets first: a deadline goes with its table, so the table must be gone before the deadlines' turn.
    for key in sorted(tables, key=lambda k: types[k] == b"zset"):
        kind = types[key]
        if kind == b"set":  # members are routing_key SEP pattern SEP queue
            members = [
                m for m in client.sscan_iter(key, count=1000) if names.owns(m.decode(errors="replace").split(sep)[-1])
            ]
            if members:
                removed += client.srem(key, *members)
        elif kind == b"zset":  # _kombu.binding_deadlines: exchange → when its table expires
            # The run's, and deadlines of tables gone (a consumer's refresh re-adds one that comes back).
            members = [
                m
                for m, _ in client.zscan_iter(key, count=1000)
                if names.owns(m.decode(errors="replace")) or not client.exists(b"_kombu.binding." + m)
            ]
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


def keep_redis(target: str, url: str, names: RunNames, ttl_s: float, connect=from_url) -> int:
    """A TTL of ``ttl_s`` on the run's queue lists (every priority) and binding tables, set anew at
    each call (a list emptied and filled again has lost it). Its results carry Celery's own."""
    if target != BROKER:
        return 0
    keys = [
        k
        for q in (*names.queues, *names.other_queues)
        for k in (q, *[f"{q}{_REDIS_SEP}{p}" for p in _REDIS_PRIORITY_STEPS])
    ]
    keys += [f"{table}{q}" for q in names.queues for table in ("_kombu.binding.", "_kombu.binding_permanent.")]
    client = connect(url, 10)
    try:
        with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.expire(key, max(1, int(ttl_s)))
            return sum(bool(r) for r in pipe.execute())
    finally:
        client.close()


class Redis(Server):
    name, product = REDIS, "Redis"
    schemes = MappingProxyType({"redis": 6379, "rediss": 6379})
    url_form = "redis://:{password}@{address}:{port}/{db}"
    #: Where a disposable Redis given by URL lives (:meth:`place_of`).
    variables = MappingProxyType({"redis_dir": "text"})
    role_vars = MappingProxyType({"redis_dir": "{{ __cmx_workdir }}/redis"})
    restartable = partitionable = visibility_timeout = green_waits_at_limit = True
    local = (
        LocalService(
            "Redis",
            REDIS,
            6379,
            "redis-server",
            "redis-server",
            30,
            lambda: [
                ["mkdir", "-p", "/var/lib/redis", "/var/log/redis"],
                [
                    "redis-server",
                    "--daemonize",
                    "yes",
                    "--bind",
                    "127.0.0.1",
                    "-::1",
                    "--port",
                    "6379",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    "/var/lib/redis",
                    "--logfile",
                    "/var/log/redis/cmx.log",
                ],
            ],
        ),
    )

    #: How its raw clients (probe, remover, keeper, raw baseline, ping) reach it: ``(url, timeout,
    #: **redis-py options)`` → a redis-py client.
    connect = staticmethod(from_url)

    def ping(self, url: str, timeout: float) -> None:
        self.connect(url, timeout).ping()

    def client_name_settings(self, target: str, name: str, conf: Mapping[str, Any]) -> dict[str, Any]:
        if target == BROKER:
            opts = dict(conf.get("broker_transport_options") or {})
            opts["client_name"] = name
            return {"broker_transport_options": opts}
        return {"redis_client_name": name}

    def run_key_settings(self, target: str, prefix: str, conf: Mapping[str, Any]) -> dict[str, Any]:
        if target != BACKEND:  # queue names carry the run's id already
            return {}
        opts = dict(conf.get("result_backend_transport_options") or {})
        opts["global_keyprefix"] = prefix
        return {"result_backend_transport_options": opts}

    def broker_version(self, conn) -> str:
        return "redis " + conn.default_channel.client.info("server")["redis_version"]

    def backend_version(self, app) -> str:
        return "redis " + app.backend.client.info("server")["redis_version"]

    def fast_publisher(self, app, capture: Capture, stream: bool) -> RedisPublisher:
        return RedisPublisher(app, capture, stream)

    def raw_client(self, url, queue, name, queue_arguments, durable, prefetch) -> RedisRaw:
        return RedisRaw(url, queue, name, self.connect)

    def queue_depth(self, conn, queue: str) -> int:
        """kombu says NOT_FOUND of a Redis queue without a message (an empty list is no key in
        Redis): that is a depth of 0, not a sample missed."""
        from kombu.exceptions import ChannelError

        try:
            return super().queue_depth(conn, queue)
        except ChannelError:
            return 0

    def wake_consumers(self, app, client_name: str) -> int:
        """End the BRPOP each worker has in flight on the hold queue alone (``CLIENT UNBLOCK``, as if
        it timed out), so every worker polls the run's queue now, not up to ``brpop_timeout`` (1 s)
        later at a moment of its own: in backlog mode the first to poll would take most of the work.
        Only the connections named ``client_name`` (the run's workers') are touched."""
        woken = 0
        try:
            with app.connection_for_write() as conn:
                client = conn.default_channel.client
                for c in client.client_list():
                    if c.get("name") == client_name and c.get("cmd") in ("brpop", "blpop"):
                        woken += int(client.client_unblock(int(c["id"])))
        except Exception:  # an ACL without CLIENT: workers still start within brpop_timeout
            return -1
        return woken

    def probe(self, role: str, run_id: str | None) -> RedisProbe:
        return RedisProbe(role, self.name, run_id, self.connect)

    def remove_run(self, target: str, url: str, names: RunNames) -> int:
        return remove_redis(target, url, names, self.connect)

    def keep_expiring(self, target: str, url: str, names: RunNames, ttl_s: float) -> int:
        return keep_redis(target, url, names, ttl_s, self.connect)

    def place_of(self, host: str, hostvars: Mapping[str, Any], provisioned: bool) -> dict[str, Any]:
        """The sweep's Redis: ``<cmx_workdir>/redis`` (engine/hosts/playbooks/services.yml); a
        disposable one given by URL: the inventory's ``redis_dir`` (its redis.conf and redis.pid)."""
        unit = f"cmx-{self.name}-{host}"
        if provisioned:
            return {"unit": unit}
        if not hostvars.get("redis_dir"):
            raise ValueError(
                f"give redis_dir on brokers host {host} (the dir of its redis.conf and redis.pid, "
                "as roles/redis lays them out)"
            )
        return {"dir": str(hostvars["redis_dir"]), "unit": unit}

    def restart(self, place: Place, timeout: float = 60.0) -> float:
        """As roles/redis: ``redis.conf`` and ``redis.pid`` in ``place.dir``; under systemd (its
        config says ``daemonize no``) in the transient unit ``place.unit``."""
        conf, pidfile = os.path.join(place.dir, "redis.conf"), os.path.join(place.dir, "redis.pid")
        if not os.path.exists(conf):
            raise RestartError(f"no Redis provisioned by cmx in {place.dir} (no redis.conf)")
        settings = dict(line.split(None, 1) for line in open(conf).read().splitlines() if " " in line)
        bind = settings.get("bind", "127.0.0.1").split()[0]
        began = time.monotonic()
        stop_pid(read_pid(pidfile), timeout / 2)
        wait_port(bind, place.port, False, timeout / 2)
        systemd = settings.get("daemonize", "yes").strip() == "no"
        if systemd and not place.unit:
            raise RestartError("a Redis under systemd needs its unit name to be started again")
        run((["systemd-run", "--unit", place.unit, "--collect"] if systemd else []) + ["redis-server", conf], timeout)
        wait_port(bind, place.port, True, max(1.0, timeout - (time.monotonic() - began)))
        return time.monotonic() - began

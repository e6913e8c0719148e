"""RabbitMQ: a broker over AMQP 0-9-1 (kombu's py-amqp transport; pika for ``via: raw``), and the
node a sweep provisions with roles/rabbitmq."""

from __future__ import annotations

import os
import re
import time
from types import MappingProxyType
from typing import Any, Mapping

from cmx.workloads.vocab.clients import BROKER
from cmx.workloads.vocab.queues import QUEUE_TYPES
from cmx.workloads.vocab.services import RABBITMQ

from .base import (
    Capture,
    Hosts,
    LocalService,
    Part,
    Place,
    RestartError,
    RunNames,
    Server,
    read_pid,
    run,
    stop_pid,
)
from .probes import ConnectionProbe
from .rabbitmq_publisher import AmqpPublisher
from .rabbitmq_probes import API_ENV, API_VAR, MANAGEMENT_PORT_VAR, api_url, check_api, queue_from_api, rabbitmq_probe


def pika_parameters(url: str, name: str | None = None):
    """pika's parameters for a kombu-style AMQP URL (kombu reads ``//`` as vhost ``/``; pika does not)."""
    import pika
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
    return pika.ConnectionParameters(
        host=parts.hostname or "localhost",
        port=parts.port or 5672,
        virtual_host=vhost,
        credentials=pika.PlainCredentials(unquote(parts.username or "guest"), unquote(parts.password or "guest")),
        heartbeat=0,
        client_properties={"connection_name": name} if name else None,
    )


class RabbitRaw:
    def __init__(self, url: str, queue: str, queue_arguments: dict, prefetch: int, name: str, durable: bool = False):
        import pika

        self.pika, self.queue, self.prefetch = pika, queue, prefetch
        self.params = pika_parameters(url, name)  # counted as the run's driver
        # Durable where the kind needs it (quorum queues must be), not because x-expires is there.
        self.args, self.durable = dict(queue_arguments) or None, durable
        self.conn = pika.BlockingConnection(self.params)
        self.channel = self.conn.channel()

    def reset(self) -> None:
        self.channel.queue_delete(self.queue)
        self.channel.queue_declare(self.queue, durable=self.durable, arguments=self.args)

    def sender(self, batched: bool):
        if not batched:
            self.channel.confirm_delivery()  # each basic_publish then returns with the broker's ack
        # A synchronous method on the same channel: the broker answers it only after handling
        # every publish the channel sent before it.
        return (
            lambda body: self.channel.basic_publish("", self.queue, body),
            lambda: self.channel.queue_declare(self.queue, passive=True),
        )

    def consume(self, handle, done, poll_s: float) -> None:
        conn = self.pika.BlockingConnection(self.params)  # pika connections are not thread-safe
        try:
            channel = conn.channel()
            channel.basic_qos(prefetch_count=self.prefetch)

            def on_message(ch, method, properties, body):
                handle(body, bool(method.redelivered))
                ch.basic_ack(method.delivery_tag)

            channel.basic_consume(self.queue, on_message)
            while not done.is_set():
                conn.process_data_events(time_limit=poll_s)
        finally:
            conn.close()

    def close(self) -> None:
        try:
            self.channel.queue_delete(self.queue)
        finally:
            self.conn.close()


def remove_rabbitmq(target: str, url: str, names: RunNames) -> int:
    """The run's queues (with their messages and bindings) and its exchanges. Deleting what is
    not there is not an error (RabbitMQ answers ok). Returns how many deletions were asked."""
    from kombu import Connection

    if target != BROKER or names.task_ids:
        return 0
    asked = 0
    with Connection(url, connect_timeout=10) as conn:
        conn.ensure_connection(max_retries=3)
        channel = conn.channel()
        for what, name in [("queue", q) for q in (*names.queues, *names.other_queues)] + [
            ("exchange", e) for e in names.queues
        ]:
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


class RabbitMQ(Server):
    name, product = RABBITMQ, "RabbitMQ"
    schemes = MappingProxyType({"amqp": 5672, "amqps": 5671, "pyamqp": 5672})
    url_form = "amqp://cmx:{password}@{address}:{port}//"
    expires_queues = restartable = partitionable = heartbeats = True
    variables = MappingProxyType(
        {
            API_VAR: "url",
            MANAGEMENT_PORT_VAR: "port",
            # Where a node lives on its host, for restart_broker (place_of).
            f"{RABBITMQ}_base_dir": "text",
            f"{RABBITMQ}_nodename": "text",
            f"{RABBITMQ}_dist_port": "port",
        }
    )
    parts = (
        Part(
            f"{RABBITMQ} api",
            API_VAR,
            "connection counts come from rabbitmqctl (~0.5 CPU-second a call on the broker host)",
            check_api,
        ),
    )
    secret_names = (API_ENV,)
    #: Where the run's processes find its management API (the probe, the queue type's read-back).
    api_env = API_ENV
    queue_types = QUEUE_TYPES
    local = (
        LocalService(
            "RabbitMQ",
            RABBITMQ,
            5672,
            "rabbitmq-server",
            "rabbitmq-server",
            90,
            lambda: [["rabbitmq-server", "-detached"]],
        ),
        # Cheap connection counts for the sampler (else rabbitmqctl, ~0.5 CPU-second a call).
        LocalService(
            "RabbitMQ management",
            None,
            15672,
            "rabbitmq-plugins",
            "rabbitmq-server",
            60,
            lambda: [["rabbitmq-plugins", "enable", "--quiet", "rabbitmq_management"]],
        ),
    )

    def ping(self, url: str, timeout: float) -> None:
        from kombu import Connection

        with Connection(url, connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)

    def client_name_settings(self, target: str, name: str, conf: Mapping[str, Any]) -> dict[str, Any]:
        if target != BROKER:
            return super().client_name_settings(target, name, conf)
        # py-amqp takes client_properties through kombu's transport options
        opts = dict(conf.get("broker_transport_options") or {})
        opts["client_properties"] = {**(opts.get("client_properties") or {}), "connection_name": name}
        return {"broker_transport_options": opts}

    def broker_version(self, conn) -> str:
        props = getattr(conn.connection, "server_properties", {}) or {}
        product = props.get("product", b"")
        product = product.decode() if isinstance(product, bytes) else str(product)
        version = props.get("version", b"")
        version = version.decode() if isinstance(version, bytes) else str(version)
        return f"{product} {version}".strip()

    def fast_publisher(self, app, capture: Capture, stream: bool) -> AmqpPublisher:
        return AmqpPublisher(app, capture, stream)

    def raw_client(self, url, queue, name, queue_arguments, durable, prefetch) -> RabbitRaw:
        return RabbitRaw(
            url, queue, queue_arguments=dict(queue_arguments), durable=durable, prefetch=prefetch, name=name
        )

    def secrets(self, hosts: Hosts) -> dict[str, str]:
        """Its management API's URL, for the sampler's probe (else rabbitmqctl's)."""
        return {API_ENV: api_url(hosts, tuple(self.schemes)) or ""}

    def probe(self, role: str, run_id: str | None) -> ConnectionProbe:
        return rabbitmq_probe(role, self.name, run_id)

    def queue_type(self, conn, queue: str, arguments: Mapping[str, Any]) -> tuple[str, str]:
        """From the management API where the run has one (its :attr:`api_env`: the queue's
        ``type``, and in the source the nodes that hold it), else from the broker's own
        equivalence check: a quorum queue's redeclaration with ``x-queue-type: quorum`` succeeds,
        a classic one's is refused (PRECONDITION_FAILED)."""
        api = os.environ.get(self.api_env)
        if api:
            kind, nodes = queue_from_api(api, conn.virtual_host, queue)  # the run's vhost, not always /
            return kind, f"management API: on {', '.join(map(str, nodes))}"
        from kombu import Queue

        channel = conn.channel()
        try:
            Queue(queue, queue_arguments={**arguments, "x-queue-type": "quorum"}).bind(channel).declare()
            return "quorum", "AMQP redeclaration"
        except conn.channel_errors:
            return "classic", "AMQP redeclaration"
        finally:
            try:
                channel.close()
            except Exception:  # noqa: BLE001 (closed by the broker's refusal already)
                pass

    def remove_run(self, target: str, url: str, names: RunNames) -> int:
        return remove_rabbitmq(target, url, names)

    #: The vars of the brokers host that say where a node lives (roles/rabbitmq/defaults).
    PLACE_VARS = ("rabbitmq_base_dir", "rabbitmq_nodename")

    def place_of(self, host: str, hostvars: Mapping[str, Any], provisioned: bool) -> dict[str, Any]:
        """roles/rabbitmq's ``rabbitmq_base_dir``, ``rabbitmq_nodename`` and ``rabbitmq_dist_port``
        (their defaults there when the inventory gives none: tests/unit/test_faults.py holds the
        two to each other); a disposable node given by URL must name the first two, and its
        distribution port when it set one."""
        missing = [v for v in self.PLACE_VARS if not hostvars.get(v)]
        if missing and not provisioned:
            raise ValueError(
                f"give {' and '.join(missing)} on brokers host {host} (the node's files and name, "
                "as roles/rabbitmq lays them out)"
            )
        port = int(hostvars.get("rabbitmq_port", 5672))
        node = hostvars.get("rabbitmq_nodename") or f"cmx-{re.sub('[^A-Za-z0-9_-]', '-', host)}@localhost"
        dist = hostvars.get("rabbitmq_dist_port") or (port + 20000 if provisioned else None)  # else RabbitMQ's own
        return {
            "dir": str(hostvars.get("rabbitmq_base_dir") or f"/var/lib/cmx-rabbitmq/{host}"),
            "node": str(node),
            "env": {"RABBITMQ_DIST_PORT": str(dist)} if dist else {},
        }

    def restart(self, place: Place, timeout: float = 60.0) -> float:
        """As roles/rabbitmq: node ``place.node`` with its files in ``place.dir`` (the role's
        environment, roles/rabbitmq/vars), stopped by its pid file and started detached."""
        if not place.node:
            raise RestartError("a RabbitMQ restart needs the node's name")
        base, pidfile = place.dir, os.path.join(place.dir, "rabbitmq.pid")
        env = {
            "RABBITMQ_NODENAME": place.node,
            "RABBITMQ_MNESIA_BASE": f"{base}/mnesia",
            "RABBITMQ_LOG_BASE": f"{base}/log",
            "RABBITMQ_CONFIG_FILE": f"{base}/rabbitmq.conf",
            "RABBITMQ_ENABLED_PLUGINS_FILE": f"{base}/enabled_plugins",
            "RABBITMQ_PID_FILE": pidfile,
            **place.env,
        }
        pid = read_pid(pidfile)
        if pid is None:
            raise RestartError(f"no RabbitMQ node provisioned by cmx in {base} (no pid file)")
        began = time.monotonic()
        try:  # it returns once the node's process exited
            run(["rabbitmqctl", "-q", "-n", place.node, "stop", pidfile], timeout / 2, env)
        except RestartError:
            stop_pid(pid, 5)
        run(["rabbitmq-server", "-detached"], timeout / 2, env)
        while True:  # booted: its listeners are up
            try:
                run(["rabbitmqctl", "-q", "-n", place.node, "await_startup", "--timeout", "5"], 30, env)
                break
            except RestartError:
                if time.monotonic() - began > timeout:
                    raise
                time.sleep(0.5)
        return time.monotonic() - began

"""Redis Sentinel: where the servers of a ``redis-sentinel`` broker run, its URL, its clients.

A ``redis-sentinel`` broker is one Redis master, one replica and three sentinels watching them
(roles/redis_sentinel). Celery reaches it by kombu's ``sentinel://`` transport: one URL per
sentinel joined by ``;``, the master's name in ``broker_transport_options["master_name"]`` and
the sentinels' own password in ``broker_transport_options["sentinel_kwargs"]``
(kombu/transport/redis.py ``SentinelChannel``). cmx's URL for it (the inventory's ``broker_url``
and ``CMX_BROKER_URL``) is kombu's with the master's name as a query, ``...;sentinel://:pw@h:26381/0
?master_name=cmx``, so one string carries all of it: :func:`celery_broker` splits it again.

Its server (:class:`RedisSentinel`) is Redis's, reached through the sentinels: every raw client
(probe, remover, keeper, raw baseline, ping) gets the master the sentinels name now; Celery's own
connections follow them by kombu. Its faults: :func:`failover` (``SENTINEL FAILOVER``) and
:func:`kill_master`. Standard library only at import; redis-py is imported by the clients.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from cmx.workloads.vocab.services import REDIS_SENTINEL

from .base import Hosts
from .redis import Redis

SCHEME = "sentinel"
#: The first port of a host's sentinels (the service's port) unless its ``redis_sentinel_port`` says otherwise.
SENTINEL_PORT = 26379
#: The master's name the role gives the set it provisions, unless ``redis_sentinel_master_name`` says otherwise.
MASTER_NAME = "cmx"
#: What one set is made of, in the order its members are spread over the broker hosts.
MEMBERS = ("master", "replica", "sentinel", "sentinel", "sentinel")
#: The first port of the Redis servers of a set cmx provisions (the sentinels': the service's port,
#: 26379), unless the inventory's ``redis_sentinel_redis_port`` says otherwise: beside a Redis on 6379.
REDIS_PORT = 6380
REDIS_PORT_VAR = f"{REDIS_SENTINEL}_redis_port"
#: Sentinels that must agree a master is down (of three).
QUORUM = 2


@dataclass(frozen=True)
class Member:
    """One server of the set: on inventory host ``host`` (reached at ``address``), ``role`` on ``port``."""

    host: str
    address: str
    role: str
    port: int


@dataclass(frozen=True)
class BrokerHost:
    """A broker host, with the first port of its Redis servers and of its sentinels."""

    host: str
    address: str
    redis_port: int
    sentinel_port: int


def layout(hosts: list[BrokerHost]) -> list[Member]:
    """Where each member of the set runs: member ``i`` of a kind (Redis server or sentinel) on host
    ``i mod n``, its port the host's first port of that kind plus how many of its kind that host
    has already. One host: master and replica on ``redis_port`` and ``+1``, sentinels on
    ``sentinel_port`` to ``+2``; three hosts: one sentinel each, master and replica apart."""
    if not hosts:
        raise ValueError("a Sentinel set needs at least one broker host")
    n, members, seen = len(hosts), [], {False: 0, True: 0}
    for role in MEMBERS:
        watcher = role == "sentinel"  # else a data server (master or replica)
        i = seen[watcher]
        seen[watcher] += 1
        h = hosts[i % n]
        base = h.sentinel_port if watcher else h.redis_port
        members.append(Member(h.host, h.address, role, base + i // n))
    return members


def layout_of(hosts: Hosts, group: str) -> list[Member]:
    """Where the set cmx provisions runs: spread over every host of ``group``, from each host's
    ``redis_sentinel_redis_port`` and ``redis_sentinel_port``."""
    return layout(
        [
            BrokerHost(
                h,
                hosts.address(h),
                int(hosts.hostvars.get(h, {}).get(REDIS_PORT_VAR, REDIS_PORT)),
                int(hosts.hostvars.get(h, {}).get(f"{REDIS_SENTINEL}_port", SENTINEL_PORT)),
            )
            for h in hosts.hosts_of(group)
        ]
    )


def url(members: list[Member], password: str, db: int = 0, master_name: str = MASTER_NAME) -> str:
    """cmx's URL of the set: kombu's ``sentinel://`` URLs, the master's name as a query."""
    sentinels = [m for m in members if m.role == "sentinel"]
    # kombu reads the database (and the servers' password) from the first URL: each carries both.
    head = ";".join(f"{SCHEME}://:{password}@{_host(m.address)}:{m.port}/{db}" for m in sentinels)
    return f"{head}?{urlencode({'master_name': master_name})}"


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def is_sentinel(broker_url: str) -> bool:
    return broker_url.split("://", 1)[0] == SCHEME


def split(broker_url: str) -> tuple[str, str]:
    """(kombu's URL, the master's name) of cmx's URL of a set. ValueError when it names no master."""
    head, _, query = broker_url.partition("?")
    name = dict(parse_qsl(query)).get("master_name")
    if not name:
        raise ValueError("a sentinel:// broker URL needs the master's name: end it with ?master_name=NAME")
    return head, name


def sentinels(broker_url: str) -> tuple[list[tuple[str, int]], str | None, str]:
    """([(host, port)] of every sentinel, the password, the master's name)."""
    head, name = split(broker_url)
    found, password = [], None
    for part in head.split(";"):
        p = urlsplit(part)
        found.append((p.hostname, p.port or SENTINEL_PORT))
        password = password or p.password
    return found, password, name


def celery_broker(broker_url: str) -> tuple[str, dict[str, Any]]:
    """Celery's ``broker_url`` and the ``broker_transport_options`` it needs for cmx's URL of a set:
    the master's name, and the sentinels' password (they ask for the same one as the servers)."""
    head, name = split(broker_url)
    _, password, _ = sentinels(broker_url)
    opts: dict[str, Any] = {"master_name": name}
    if password:
        opts["sentinel_kwargs"] = {"password": password}
    return head, opts


def sentinel_client(broker_url: str, timeout: float | None = 10.0):
    """A redis-py ``Sentinel`` for the set (the sentinels' password given as theirs and the servers')."""
    from redis.sentinel import Sentinel

    found, password, _ = sentinels(broker_url)
    kw = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    return Sentinel(found, sentinel_kwargs={"password": password, **kw}, password=password, **kw)


def master_client(broker_url: str, timeout: float | None = 10.0, **kwargs):
    """A redis-py client of the set's master as the sentinels name it now (and again after a
    failover, at its next connection): what every raw client of a ``redis-sentinel`` broker uses."""
    _, _, name = sentinels(broker_url)
    return sentinel_client(broker_url, timeout).master_for(
        name, socket_timeout=timeout, socket_connect_timeout=timeout, **kwargs
    )


def master_address(broker_url: str, timeout: float = 10.0) -> tuple[str, int]:
    """(host, port) of the master as the sentinels name it now."""
    _, _, name = sentinels(broker_url)
    return sentinel_client(broker_url, timeout).discover_master(name)


@dataclass(frozen=True)
class Failover:
    """A failover of the set: the master before and after, when it was asked for (``time.time()``),
    how long until the sentinels named the new master and it took writes (``took_s``), and how long
    until the old master stopped serving as one (``demoted_s``: turned into the new master's
    replica, or gone; None for a failover not waited out that far)."""

    old: tuple[str, int]
    new: tuple[str, int]
    asked_at: float
    took_s: float
    demoted_s: float | None = None


def _serves_as_master(client) -> bool:
    """Whether the server ``client`` reaches still says it is a master (False once it is a replica
    or cannot be reached: its demotion closes this connection too, as every client's)."""
    import redis

    try:
        return client.info("replication")["role"] == "master"
    except redis.RedisError:
        return False


def failover(broker_url: str, timeout_s: float = 30.0) -> Failover:
    """Fail the set's master over (``SENTINEL FAILOVER`` to the first sentinel that takes it: no
    agreement needed, the replica is promoted at once) and wait, at most ``timeout_s`` in all,
    until the sentinels name another master that answers as a master, and then until the old
    master no longer serves as one. RuntimeError when either does not happen in time: the fault
    could not be injected.

    The second wait is what makes clients move: a healthy old master goes on serving the clients
    connected to it, as a master, until the sentinels turn it into the new master's replica, some
    10 s later (Sentinel waits for its new configuration to spread), and close its clients'
    connections then. Until that moment Celery's workers and producers keep working on the old
    master, whose writes the new one never sees; a failover that ended at the promotion would
    measure a set nobody had left yet."""
    import time

    import redis

    found, password, name = sentinels(broker_url)
    sentinel = sentinel_client(broker_url, timeout=min(5.0, timeout_s))
    old = tuple(sentinel.discover_master(name))
    asked_at, start = time.time(), time.monotonic()
    errors = []
    for s in sentinel.sentinels:
        try:
            s.execute_command("SENTINEL FAILOVER", name)
            break
        except Exception as exc:  # that sentinel is down or refuses (a failover under way): the next one
            errors.append(f"{type(exc).__name__}: {exc}")
    else:
        raise RuntimeError(f"no sentinel of {len(found)} took SENTINEL FAILOVER {name}: {'; '.join(errors)}")
    new = took = None
    with redis.Redis(
        host=old[0], port=old[1], password=password, socket_timeout=2, socket_connect_timeout=2
    ) as old_master:
        while True:
            if new is None:
                try:
                    named = tuple(sentinel.discover_master(name))
                    if named != old and sentinel.master_for(name).info("replication")["role"] == "master":
                        new, took = named, time.monotonic() - start
                except Exception:  # noqa: BLE001 (mid-failover the sentinels or the new master may refuse)
                    pass
            if new is not None and not _serves_as_master(old_master):
                return Failover(old, new, asked_at, took, time.monotonic() - start)
            if time.monotonic() - start > timeout_s:
                if new is None:
                    raise RuntimeError(
                        f"the sentinels named no new master for {name} within {timeout_s:g} s (still {old[0]}:{old[1]})"
                    )
                raise RuntimeError(
                    f"the old master {old[0]}:{old[1]} of {name} still served as a master "
                    f"{timeout_s:g} s after SENTINEL FAILOVER (the new one: {new[0]}:{new[1]})"
                )
            time.sleep(0.05)


def kill_master(broker_url: str, set_dir: str, timeout_s: float = 60.0) -> Failover:
    """The hard way: SIGKILL the set's master (its role's pid file ``redis-<port>.pid`` in
    ``set_dir``, on this host), wait, at most ``timeout_s``, until the sentinels agree it is down
    and name another master, then start the killed server again from its config (it rejoins as a
    replica: the sentinels reconfigure it). RuntimeError when the master is not on this host or
    no new master comes in time; the killed server is started again either way."""
    import os
    import signal
    import subprocess
    import time

    _, _, name = sentinels(broker_url)
    sentinel = sentinel_client(broker_url, timeout=5.0)
    old = tuple(sentinel.discover_master(name))
    base = os.path.join(set_dir, f"redis-{old[1]}")
    try:
        pid = int(open(base + ".pid").read().split()[0])
    except (OSError, ValueError, IndexError):
        raise RuntimeError(f"the master {old[0]}:{old[1]} is not a server of the set in {set_dir}") from None
    if "daemonize yes" not in open(base + ".conf").read():
        raise RuntimeError("the master runs under systemd here: kill_master starts only a daemonizing one again")
    asked_at, start = time.time(), time.monotonic()
    os.kill(pid, signal.SIGKILL)
    try:
        while True:
            try:
                new = tuple(sentinel.discover_master(name))
                if new != old and sentinel.master_for(name).info("replication")["role"] == "master":
                    return Failover(old, new, asked_at, time.monotonic() - start)
            except Exception:  # noqa: BLE001 (mid-failover the sentinels name the dead master or none)
                pass
            if time.monotonic() - start > timeout_s:
                raise RuntimeError(f"the sentinels named no new master for {name} within {timeout_s:g} s")
            time.sleep(0.05)
    finally:
        # Undone: the killed server comes back (with the umask its role starts it with: the
        # config the sentinels rewrite holds the password).
        subprocess.run(["redis-server", base + ".conf"], check=True, timeout=30, preexec_fn=lambda: os.umask(0o077))


class RedisSentinel(Redis):
    """A Sentinel set's master, as Redis (its publisher, wake-up, versions, naming are Redis's:
    they go through Celery's connection, which follows the sentinels)."""

    name, product = REDIS_SENTINEL, "Redis Sentinel"
    schemes = MappingProxyType({SCHEME: SENTINEL_PORT})
    url_form = ""  # its URL names every sentinel: provisioned_url
    spread = True
    variables = MappingProxyType({REDIS_PORT_VAR: "port"})
    role_vars = MappingProxyType({f"{REDIS_SENTINEL}_dir": "{{ __cmx_workdir }}/" + REDIS_SENTINEL})
    restartable = partitionable = False  # it fails over instead; a cut would drop one sentinel, not the master
    failover = True
    local = ()  # each sweep that uses one provisions it, on loopback too (roles/redis_sentinel)
    connect = staticmethod(master_client)

    def provisioned_url(self, hosts: Hosts, group: str, db: int) -> str:
        return url(layout_of(hosts, group), hosts.password(self.name), db)

    def provision_vars(self, hosts: Hosts) -> dict[str, Any]:
        """The role's ``redis_sentinel_layout`` (the set spread over the broker hosts) and master's name."""
        return {
            f"{self.name}_layout": [asdict(m) for m in layout_of(hosts, "brokers")],
            f"{self.name}_master_name": MASTER_NAME,
        }

    def celery_broker(self, url: str) -> tuple[str, dict[str, Any]]:
        return celery_broker(url)

    def fail_over(self, url: str, timeout_s: float) -> Failover:
        return failover(url, timeout_s)

    def restart(self, place, timeout: float = 60.0) -> float:
        self._none("restart (a Sentinel set fails over instead: failover / kill_master)")

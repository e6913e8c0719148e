"""What the suite may leave behind on this machine, read before it starts and after it ends.

A test (or a benchmark tool a test calls) leaves no network namespace, bridge, process of a run,
private broker, RabbitMQ queue or vhost, lasting Redis key, PostgreSQL database or temp folder.
tests/conftest.py reads :func:`snapshot` when the suite starts and again when every test (every
xdist worker) has ended, and fails the suite on anything :func:`left_behind` finds, naming it.

What is read, each bounded by a timeout and each skipped (said, not failed) when its service does
not answer, since the suite's own tests fail loudly then:
- network namespaces and links named ``cmx*`` (tests/nethosts.py's);
- processes of runs and of the tests' private servers (workers, samplers, agents, drivers,
  ``redis-server``/``sshd``/RabbitMQ nodes started from a test's folder);
- RabbitMQ's vhosts and queues (every vhost) on this machine's server, through its management API;
- Redis keys with no expiry, per database, on 127.0.0.1:6379 (a key that expires goes by itself:
  kombu's reply queues, a result kept a day);
- PostgreSQL databases;
- folders directly under the temp dir (pytest's own ``pytest-of-*`` keeps its last runs by design).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

#: Process command lines that mark a process the suite started (a run's or a test's server).
_OURS = (
    "cmx.workloads.app.worker",
    "cmx.workloads.app.driver",
    "cmx.workloads.host.sampler",
    "cmx.workloads.host.agent",
    "/pytest-of-",
    "/cmx-suite/",  # the Makefile's --basetemp: a test's private server runs from its folder
    "cmx-test",
)


def _lines(*cmd: str) -> list[str]:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in out.splitlines() if line.strip()]


def _namespaces() -> set[str]:
    return {line.split()[0] for line in _lines("ip", "netns", "list") if line.startswith("cmx")}


def _links() -> set[str]:
    names = set()
    for line in _lines("ip", "-o", "link", "show"):
        parts = line.split(":")
        if len(parts) > 1 and parts[1].strip().split("@")[0].startswith("cmx"):
            names.add(parts[1].strip().split("@")[0])
    return names


def _processes() -> set[str]:
    import psutil

    found = set()
    mine = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    for p in psutil.process_iter(["pid", "cmdline"]):
        if p.info["pid"] in mine:
            continue
        line = " ".join(p.info["cmdline"] or [])
        if any(mark in line for mark in _OURS):
            found.add(f"{p.info['pid']} {line[:160]}")
    return found


def _rabbitmq() -> tuple[set[str], set[str]] | None:
    try:
        from tests.conftest import rabbit_api

        vhosts = {v["name"] for v in rabbit_api("GET", "vhosts")}
        queues = {f"{q['vhost']}:{q['name']}" for q in rabbit_api("GET", "queues?columns=name,vhost")}
    except Exception:  # noqa: BLE001 - a server that does not answer is said, not failed
        return None
    return vhosts, queues


#: kombu's index of every exchange's binding table on a Redis database (a sorted set, exchange ->
#: when its table expires): shared by every app on the database, created by the first and never
#: removed; a member whose table is gone is no one's (kombu drops it), and a table still there is
#: its own key, seen on its own.
SHARED_INDEX = b"_kombu.binding_deadlines"


def _redis() -> set[str] | None:
    try:
        import redis

        keys = set()
        for db in range(16):
            client = redis.Redis(host="127.0.0.1", port=6379, db=db, socket_timeout=5)
            if not client.dbsize():
                continue
            pipe = client.pipeline()
            names = list(client.scan_iter(count=1000))
            for name in names:
                pipe.ttl(name)
            for name, ttl in zip(names, pipe.execute()):
                if name == SHARED_INDEX:
                    continue
                if ttl == -1:  # no expiry: stays until someone removes it
                    keys.add(f"db{db}:{name.decode(errors='replace')}")
    except Exception:  # noqa: BLE001
        return None
    return keys


def _postgres() -> set[str] | None:
    lines = _lines("psql", "-h", "127.0.0.1", "-U", "postgres", "-At", "-c", "SELECT datname FROM pg_database")
    return set(lines) or None


#: The suite's own temp root (Makefile: ``--basetemp``), emptied by pytest at each start as
#: ``pytest-of-*`` is; and the host locks' folder, which cmx keeps by design (engine/hosts/hostlock.py).
KEPT = ("pytest-of-", ".", "cmx-suite", "cmx-host-locks-")


def _temp_folders() -> set[str]:
    root = Path(tempfile.gettempdir())
    try:
        return {p.name for p in root.iterdir() if not p.name.startswith(KEPT)}
    except OSError:
        return set()


def snapshot() -> dict[str, set[str] | None]:
    """The machine's state as the suite can change it; ``None`` where a service did not answer."""
    rabbit = _rabbitmq()
    return {
        "network namespaces": _namespaces(),
        "network links": _links(),
        "processes": _processes(),
        "RabbitMQ vhosts": rabbit[0] if rabbit else None,
        "RabbitMQ queues": rabbit[1] if rabbit else None,
        "Redis keys without expiry": _redis(),
        "PostgreSQL databases": _postgres(),
        "temp folders": _temp_folders(),
    }


def left_behind(before: dict, after: dict) -> dict[str, list[str]]:
    """What ``after`` holds that ``before`` did not, per kind (kinds unread either time left out)."""
    found = {}
    for kind, now in after.items():
        was = before.get(kind)
        if now is None or was is None:
            continue
        new = sorted(now - was)
        if new:
            found[kind] = new
    return found


def dump(state: dict, path: Path) -> None:
    path.write_text(json.dumps({k: sorted(v) if v is not None else None for k, v in state.items()}))


def load(path: Path) -> dict:
    return {k: set(v) if v is not None else None for k, v in json.loads(path.read_text()).items()}

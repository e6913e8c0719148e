"""Record a Celery fleet's task events into a profile (Parquet).

Listens only: Celery's own event receiver (``app.events.Receiver``) binds its own auto-delete event
queue; nothing is published or consumed on the user's queues. Args/kwargs are kept as sizes unless
``keep_args``. The broker URL's password never reaches the profile or a log.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from cmx.engine.errors import InputError

ENV_URL = "CMX_CAPTURE_BROKER_URL"
NO_EVENTS_AFTER = 10.0
#: Seconds one connection attempt to the broker may take, and how many more attempts follow.
CONNECT_TIMEOUT_S = 4.0
CONNECT_RETRIES = 2
NO_EVENTS_HINT = ("no task events within 10 s: start workers with -E (worker_send_task_events = True) and "
                  "set task_send_sent_event = True on producers, then capture again")
COLUMNS = ("uuid", "name", "queue", "routing_key", "sent", "received", "started", "succeeded", "failed",
           "retries", "runtime", "eta", "expires", "parent_id", "root_id", "args_bytes", "kwargs_bytes",
           "args", "kwargs")
_TIME_OF = {"task-sent": "sent", "task-received": "received", "task-started": "started",
            "task-succeeded": "succeeded", "task-failed": "failed"}


def broker_url(argv_url: str | None) -> str:
    """The URL to listen on: argv (without a password) or $CMX_CAPTURE_BROKER_URL. A password on argv is refused."""
    if argv_url:
        if urlsplit(argv_url).password:
            raise InputError(f"--broker: a password on the command line is refused (it shows in ps and shell "
                             f"history); put the URL in ${ENV_URL} instead")
        return argv_url
    url = os.environ.get(ENV_URL)
    if not url:
        raise InputError(f"--broker: give a broker URL without a password, or set ${ENV_URL}")
    return url


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


@dataclass
class Recorder:
    """Folds task events into one row per task id."""

    queues: tuple[str, ...] = ()
    keep_args: bool = False
    tasks: dict[str, dict] = field(default_factory=dict)
    events: int = 0

    def __call__(self, event: dict) -> None:
        kind, uuid = event.get("type", ""), event.get("uuid")
        if not kind.startswith("task-") or not uuid:
            return
        self.events += 1
        row = self.tasks.setdefault(uuid, {"uuid": uuid, "retries": 0})
        if kind in _TIME_OF:
            row.setdefault(_TIME_OF[kind], event.get("timestamp"))
        if kind == "task-retried":
            row["retries"] += 1
        for key in ("name", "eta", "expires", "parent_id", "root_id"):
            if event.get(key) is not None:
                row[key] = event[key]
        if event.get("queue"):
            row["queue"] = event["queue"]
        if event.get("routing_key"):
            row["routing_key"] = event["routing_key"]
        if event.get("runtime") is not None:
            row["runtime"] = float(event["runtime"])
        for key in ("args", "kwargs"):
            if event.get(key) is not None:
                row[f"{key}_bytes"] = len(str(event[key]).encode())
                if self.keep_args:
                    row[key] = str(event[key])

    def rows(self) -> list[dict]:
        keep = [r for r in self.tasks.values()
                if not self.queues or r.get("queue", r.get("routing_key")) in self.queues]
        return [{c: r.get(c) for c in COLUMNS} for r in keep]


def write_profile(rows: list[dict], out: Path) -> int:
    """Write the rows as Parquet through DuckDB; returns the row count."""
    import duckdb

    con = duckdb.connect()
    cols = ", ".join(f"{c} {_TYPE.get(c, 'DOUBLE')}" for c in COLUMNS)
    con.execute(f"CREATE TABLE profile ({cols})")
    if rows:
        con.executemany(f"INSERT INTO profile VALUES ({', '.join('?' * len(COLUMNS))})",
                        [[r[c] for c in COLUMNS] for r in rows])
    out.parent.mkdir(parents=True, exist_ok=True)
    con.execute(f"COPY (SELECT * FROM profile ORDER BY coalesce(sent, received)) TO '{out}' (FORMAT parquet)")
    return len(rows)


_TYPE = {c: "VARCHAR" for c in ("uuid", "name", "queue", "routing_key", "eta", "expires", "parent_id",
                                "root_id", "args", "kwargs")} | {"retries": "INTEGER", "args_bytes": "BIGINT",
                                                                 "kwargs_bytes": "BIGINT"}


def capture(url: str, out: Path, duration: float, queues: tuple[str, ...] = (), keep_args: bool = False,
           progress=sys.stderr) -> int:
    """The loop behind ``cmx capture``: drain events in 1 s slices, print events/s, stop on time or Ctrl-C."""
    import socket

    from celery import Celery

    from kombu.exceptions import OperationalError

    app = Celery("cmx-capture", broker=url, set_as_current=False)
    app.conf.broker_connection_timeout = CONNECT_TIMEOUT_S
    rec = Recorder(tuple(queues), keep_args)
    try:
        with app.connection_for_read() as conn:
            try:  # bounded: a broker that does not answer ends the capture with one line, exit 2
                conn.ensure_connection(max_retries=CONNECT_RETRIES, interval_start=0.5, interval_step=0.5,
                                       timeout=CONNECT_TIMEOUT_S * (CONNECT_RETRIES + 1))
            except (OperationalError, OSError, *conn.connection_errors) as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise InputError(f"--broker: cannot reach {redact(url)} ({reason})") from None
            start = time.monotonic()
            recv = app.events.Receiver(conn, handlers={"*": rec})
            consumers = recv.get_consumers(conn.Consumer, conn.default_channel)
            for c in consumers:
                c.consume()
            last, seen = start, 0
            while time.monotonic() - start < duration:
                try:
                    conn.drain_events(timeout=0.5)
                except (socket.timeout, TimeoutError):
                    pass
                now = time.monotonic()
                if rec.events == 0 and now - start >= NO_EVENTS_AFTER:
                    raise InputError(NO_EVENTS_HINT)
                if now - last >= 1.0:
                    rate = (rec.events - seen) / (now - last)
                    print(f"\rcapturing {redact(url)}: {rec.events:,} events, {len(rec.tasks):,} tasks, "
                          f"{rate:,.0f} events/s, {now - start:,.0f}/{duration:,.0f} s", end="", file=progress,
                          flush=True)
                    last, seen = now, rec.events
    except KeyboardInterrupt:
        pass
    print("", file=progress)
    return write_profile(rec.rows(), out)


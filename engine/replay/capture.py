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
NO_EVENTS_HINT = (
    "no task events within 10 s: start workers with -E (worker_send_task_events = True), and "
    "for send times set task_send_sent_event = True on producers, then capture again"
)
COLUMNS = (
    "uuid",
    "name",
    "queue",
    "routing_key",
    "sent",
    "received",
    "started",
    "succeeded",
    "failed",
    "retries",
    "runtime",
    "eta",
    "expires",
    "parent_id",
    "root_id",
    "args_bytes",
    "kwargs_bytes",
    "args",
    "kwargs",
    "arrival",
    "arrival_source",
    "args_lead_list",
)
#: Where a task's arrival (the time replay sends it at) is read from, first found first:
#: ``sent`` the producer's task-sent (needs task_send_sent_event), ``received`` the worker's task-received.
ARRIVALS = {"sent": ("sent", "received", "started"), "received": ("received", "started")}
#: After a read that found events, the listener waits this long before reading again, so that it reads
#: what arrived meanwhile in one go rather than waking for every event (docs/replay.md, "Capture overhead").
BATCH_S = 0.05
#: At the end (time up or Ctrl-C) the events already on their way are read for at most this long.
FINAL_WAIT_S, FINAL_LONGEST_S = 0.2, 2.0
_TIME_OF = {
    "task-sent": "sent",
    "task-received": "received",
    "task-started": "started",
    "task-succeeded": "succeeded",
    "task-failed": "failed",
}


def broker_url(argv_url: str | None) -> str:
    """The URL to listen on: argv (without a password) or $CMX_CAPTURE_BROKER_URL. A password on argv is refused."""
    if argv_url:
        if urlsplit(argv_url).password:
            raise InputError(
                f"--broker: a password on the command line is refused (it shows in ps and shell "
                f"history); put the URL in ${ENV_URL} instead"
            )
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
    arrivals: str = "sent"
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
                if key == "args" and "args_lead_list" not in row:  # once a task: sent and received carry it
                    row["args_lead_list"] = lead_list_len(str(event[key]))
                if self.keep_args:
                    row[key] = str(event[key])

    def rows(self) -> list[dict]:
        keep = [
            r for r in self.tasks.values() if not self.queues or r.get("queue", r.get("routing_key")) in self.queues
        ]
        return [with_arrival({c: r.get(c) for c in COLUMNS}, self.arrivals) for r in keep]


def lead_list_len(argsrepr: str) -> int | None:
    """How many items the list leading a task's args holds, read off its repr (as task events carry it:
    ``([1, 2, 3], 'x')``); None when no list leads them or the repr was cut short (Celery cuts it at
    1,024 characters). A chord's body receives its header's results as such a list, a chain's next
    task its one predecessor's result: this is what tells the two apart (replay_plan)."""
    text = argsrepr.strip()
    text = text[1:].lstrip() if text.startswith("(") else text
    if not text.startswith("["):
        return None
    depth, commas, quote, escaped = 0, 0, None, False
    for i, ch in enumerate(text):
        if quote:
            escaped, quote = (False, quote) if escaped else (ch == "\\", None if ch == quote else quote)
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return commas + 1 if text[1:i].strip() else 0
        elif ch == "," and depth == 1:
            commas += 1
    return None


def with_arrival(row: dict, arrivals: str = "sent") -> dict:
    """``row`` with its ``arrival`` and ``arrival_source``: the first time of ``ARRIVALS[arrivals]`` it has."""
    source = next((k for k in ARRIVALS[arrivals] if row.get(k) is not None), None)
    return row | {"arrival": row.get(source) if source else None, "arrival_source": source}


def write_profile(rows: list[dict], out: Path) -> int:
    """Write the rows as Parquet through DuckDB (read from newline-delimited JSON: inserting row by row
    took about 1 ms a row); returns the row count. A row without an ``arrival_source`` gets one
    (:func:`with_arrival`)."""
    import json
    import tempfile

    import duckdb

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cmx-capture-") as tmp:
        lines = Path(tmp) / "rows.jsonl"
        with lines.open("w") as f:
            for r in rows:
                r = r if r.get("arrival_source") else with_arrival(r)
                f.write(json.dumps([r.get(c) for c in COLUMNS]) + "\n")
        con = duckdb.connect()
        try:
            picked = ", ".join(f"CAST(json->>{i} AS {_TYPE.get(c, 'DOUBLE')}) AS {c}" for i, c in enumerate(COLUMNS))
            source = (
                f"(SELECT {picked} FROM read_json('{lines}', format='newline_delimited', "
                f"columns={{'json': 'JSON'}}, records=false))"
                if rows
                else f"(SELECT * FROM (VALUES ({', '.join('NULL::' + _TYPE.get(c, 'DOUBLE') for c in COLUMNS)})) "
                f"t({', '.join(COLUMNS)}) WHERE false)"
            )
            con.execute(f"COPY (SELECT * FROM {source} ORDER BY arrival) TO '{out}' (FORMAT parquet)")
        finally:
            con.close()
    return len(rows)


_TYPE = {
    c: "VARCHAR"
    for c in (
        "uuid",
        "name",
        "queue",
        "routing_key",
        "eta",
        "expires",
        "parent_id",
        "root_id",
        "args",
        "kwargs",
        "arrival_source",
    )
}
_TYPE |= {"retries": "INTEGER", "args_bytes": "BIGINT", "kwargs_bytes": "BIGINT", "args_lead_list": "INTEGER"}


#: Seconds between progress lines in a log (a terminal rewrites one line each second).
LOG_EVERY_S = 10.0


def _is_terminal(stream) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def progress_printer(stream):
    """(say, every): on a terminal, one line rewritten in place each second; in a log file or pipe,
    a whole line every ``LOG_EVERY_S`` (a log of ``\\r``-joined updates is one huge line)."""
    if _is_terminal(stream):
        return (lambda text: print(f"\r{text}", end="", file=stream, flush=True)), 1.0
    return (lambda text: print(text, file=stream, flush=True)), LOG_EVERY_S


def capture(
    url: str,
    out: Path,
    duration: float,
    queues: tuple[str, ...] = (),
    keep_args: bool = False,
    progress=sys.stderr,
    arrivals: str = "sent",
) -> int:
    """The loop behind ``cmx capture``: read events in batches (:func:`_read_batch`), print events/s each
    second, stop on time or Ctrl-C."""
    import socket

    from celery import Celery

    from kombu.exceptions import OperationalError

    app = Celery("cmx-capture", broker=url, set_as_current=False)
    app.conf.broker_connection_timeout = CONNECT_TIMEOUT_S
    if arrivals not in ARRIVALS:
        raise InputError(f"--arrivals: {arrivals!r} is not one of {', '.join(ARRIVALS)}")
    rec = Recorder(tuple(queues), keep_args, arrivals)
    try:
        with app.connection_for_read() as conn:
            try:  # bounded: a broker that does not answer ends the capture with one line, exit 2
                conn.ensure_connection(
                    max_retries=CONNECT_RETRIES,
                    interval_start=0.5,
                    interval_step=0.5,
                    timeout=CONNECT_TIMEOUT_S * (CONNECT_RETRIES + 1),
                )
            except (OperationalError, OSError, *conn.connection_errors) as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise InputError(f"--broker: cannot reach {redact(url)} ({reason})") from None
            start = time.monotonic()
            recv = app.events.Receiver(conn, handlers={"*": rec})
            consumers = recv.get_consumers(conn.Consumer, conn.default_channel)
            for c in consumers:
                c.consume()
            last, seen = start, 0
            say, every = progress_printer(progress)
            try:
                while time.monotonic() - start < duration:
                    if _read_batch(conn, socket.timeout):
                        time.sleep(BATCH_S)
                    now = time.monotonic()
                    if rec.events == 0 and now - start >= NO_EVENTS_AFTER:
                        raise InputError(NO_EVENTS_HINT)
                    if now - last >= every:
                        rate = (rec.events - seen) / (now - last)
                        say(
                            f"capturing {redact(url)}: {rec.events:,} events, {len(rec.tasks):,} tasks, "
                            f"{rate:,.0f} events/s, {now - start:,.0f}/{duration:,.0f} s"
                        )
                        last, seen = now, rec.events
            except KeyboardInterrupt:
                pass
            try:  # what had arrived by the end (or the Ctrl-C) but was not read yet: bounded, best effort (a
                # Ctrl-C in the middle of a frame leaves the connection unreadable; what was read is written)
                _read_batch(conn, socket.timeout, wait=FINAL_WAIT_S, longest=FINAL_LONGEST_S)
            except (KeyboardInterrupt, Exception):
                pass
    except KeyboardInterrupt:
        pass
    if _is_terminal(progress):
        print("", file=progress)  # the end of the line rewritten in place
    unknown = sum(1 for r in rec.tasks.values() if r.get("queue", r.get("routing_key")) is None)
    if queues and unknown:
        print(
            f"{unknown:,} tasks had no queue (only task-sent events name it) and were left out by --queue",
            file=progress,
        )
    return write_profile(rec.rows(), out)


def _read_batch(conn, timeout_error, wait: float = 0.5, longest: float = 0.5) -> bool:
    """Handle the events that have arrived, waiting up to ``wait`` s for a first one and reading for at
    most ``longest`` s; whether any came. (One ``drain_events`` handles one AMQP frame, or what one Redis
    read holds.)"""
    got, began = False, time.monotonic()
    while time.monotonic() - began < longest:
        try:
            conn.drain_events(timeout=wait if not got else 0.001)
        except (timeout_error, TimeoutError):
            return got
        got = True
    return got

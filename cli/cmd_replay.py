"""``cmx capture`` and ``cmx profile show``: record a Celery fleet's task events, then summarise them
(cmx.engine.replay)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cmx.cli.common import app, fail, out
from cmx.engine.errors import InputError

profile_app = typer.Typer(help="Read a captured profile (cmx capture --out).", no_args_is_help=True)
app.add_typer(profile_app, name="profile")


@app.command("capture")
def capture_cmd(
    out_path: Path = typer.Option(..., "--out", metavar="FILE", help="The profile to write (Parquet)."),
    broker: str = typer.Option(
        None, "--broker", metavar="URL", help="Broker URL without a password; else $CMX_CAPTURE_BROKER_URL."
    ),
    duration: str = typer.Option(
        "10m",
        "--duration",
        metavar="TIME",
        help="How long to listen: 600, 600s, 10m, 1h (as durations in an experiment file).",
    ),
    queue: list[str] = typer.Option([], "--queue", metavar="Q", help="Keep only tasks of this queue (repeat)."),
    keep_args: bool = typer.Option(False, "--keep-args", help="Store args/kwargs content (sizes otherwise)."),
    arrivals: str = typer.Option(
        "sent",
        "--arrivals",
        metavar="SOURCE",
        help="When a task arrived: sent (task-sent where producers send it, else "
        "task-received) or received (task-received: no producer-side event needed).",
    ),
):
    """Record what a Celery fleet runs, from its task events, into a profile.

    Workers must send task events (-E or worker_send_task_events = True). Producers may set
    task_send_sent_event = True so send times are known (one more publish per task); without it, or with
    --arrivals received, a task's arrival is its worker's receipt (the wait in the queue before it is lost).
    The profile records which (column arrival_source). cmx only listens, on its own event queue:
    nothing is published or consumed on your queues. Ctrl-C stops early and writes what was captured.

    Exit codes: 0; 2 bad input (a password on --broker, no events within 10 s, broker unreachable, --arrivals).
    """
    from cmx.engine.model.experiment import parse_duration
    from cmx.engine.replay import capture

    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        fail(InputError(f"--duration: {exc}"))
    try:
        url = capture.broker_url(broker)
        n = capture.capture(url, out_path, seconds, tuple(queue), keep_args, arrivals=arrivals)
    except InputError as exc:
        fail(exc)
    except OSError as exc:
        fail(InputError(f"--broker: cannot listen ({exc})"))
    out.print(f"captured {n:,} tasks to {out_path}", markup=False, highlight=False)


@profile_app.command("show")
def show_cmd(
    path: Path = typer.Argument(..., metavar="FILE", help="A profile cmx capture wrote."),
    fmt: str = typer.Option("table", "--format", help="table or json."),
):
    """Per task name: count, mean and peak arrival rate, runtime p50/p95/p99, payload bytes, retry share.

    Exit codes: 0; 2 bad input (no such file, not a profile, unknown --format).
    """
    from cmx.engine.replay import profile

    if fmt not in ("table", "json"):
        fail(InputError(f"--format: {fmt!r} is not table or json"))
    try:
        rows = profile.summary(path)
    except InputError as exc:
        fail(exc)
    if fmt == "json":
        print(json.dumps(rows, indent=2, default=str))
        return
    from rich.table import Table

    from cmx.analysis.units import fmt_bytes, fmt_seconds

    table = Table("name", "queue", "tasks", "rate", "peak", "runtime p50", "p95", "p99", "payload", "retry")
    for c in table.columns[2:]:
        c.justify = "right"
    for r in rows:  # the profile module's column order; runtimes in seconds, payloads in bytes
        name, queue, tasks, rate, peak, p50, p95, p99, payload, retry = list(r.values())[:10]
        table.add_row(
            name or "?",
            queue or "-",
            _or_dash(tasks, lambda v: f"{v:,}"),
            _or_dash(rate, lambda v: f"{v:.2f}/s"),
            _or_dash(peak, lambda v: f"{v:,}/s"),
            *(_or_dash(v, fmt_seconds) for v in (p50, p95, p99)),
            _or_dash(payload, fmt_bytes),
            _or_dash(retry, lambda v: f"{v:.1%}"),
        )
    from cmx.cli import tables

    tables.show(out, table, keep=1)
    sources = sorted({s for r in rows for s in (r["arrival_source"] or "-").split("+")})
    out.print(
        f"arrivals from: {', '.join(sources)} (sent: task-sent events; received: task-received, without the "
        f"queue wait before it)",
        markup=False,
        highlight=False,
    )
    kinds = profile.canvas_kinds(path)
    out.print(
        f"as replayed: {kinds['single']:,} single tasks, {kinds['chain']:,} with the tasks they spawned "
        f"(chains), {kinds['chord']:,} chords (inferred: docs/replay.md)",
        markup=False,
        highlight=False,
    )


def _or_dash(value, shown) -> str:
    return "-" if value is None else shown(value)

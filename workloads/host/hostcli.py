"""The per-host control of one run as commands, by hand: ``python -m cmx.workloads.host.hostcli CMD``
(the host's agent, workloads/host/agent.py, calls the same functions of hostctl and hostrun).

Every command works in the run dir given by ``--run-dir`` (the per-host work dir's
``runs/<run_id>``), tracks what it starts by pid files there, and is safe to call twice.

  start-worker   start the Celery worker of the run (detached) and wait until it is ready
  start-service  start the workload's service (detached) and wait until it listens
  start-sampler  start the process/connection sampler (detached)
  drive          run the driver in the foreground (``cmx.workloads.app.driver``)
  reset          remove what the run created on its broker and backend (queues, bindings, results)
  stop           stop everything the run started on this host; no stray process is left
  facts          write facts.json: CPU, cores, memory, kernel, Python and library versions
  begin          the run's start on this host in one call: spec, secrets, reset, sampler, service
                 (a JSON document on stdin; workloads/host/hostrun.py)
  finish         the run's end on this host in one call: stop, reset, facts, pack the run dir
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

from cmx.workloads.host import hostctl, hostrun


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m cmx.workloads.host.hostcli",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "command",
        choices=[
            "start-worker",
            "start-service",
            "start-sampler",
            "drive",
            "reset",
            "stop",
            "facts",
            "begin",
            "finish",
        ],
    )
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--host", default=os.environ.get("CMX_HOST", platform.node()))
    ap.add_argument("--ready-timeout", type=float, default=60.0)
    ap.add_argument("--grace", type=float, default=10.0, help="seconds between TERM and KILL on stop")
    ap.add_argument("--module", help="start-service: the service's module")
    ap.add_argument("--port", type=int, default=8765, help="start-service: its port")
    ap.add_argument("--clock-port", type=int, help="facts: the controller's clock responder (UDP port)")
    ap.add_argument("--reset", action="store_true", help="finish: also delete the run's queues")
    ap.add_argument("--keep", action="store_true", help="finish: keep the run dir beside its .tgz")
    args, rest = ap.parse_known_args(argv)
    run_dir = args.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    os.environ["CMX_RUN_DIR"], os.environ["CMX_HOST"] = str(run_dir), args.host

    if args.command == "begin":
        return hostrun.begin(run_dir, args.host, hostrun.read_payload())
    hostrun.load_secrets(run_dir)  # from begin's file: never from a command line
    if args.command == "finish":
        return hostrun.finish(run_dir, args.host, args.grace, args.reset, args.clock_port, args.keep)
    if args.command == "start-worker":
        return hostctl.start_worker(run_dir, args.host, args.ready_timeout)
    if args.command == "start-service":
        return hostctl.start_service(run_dir, args.module, args.port, args.ready_timeout)
    if args.command == "start-sampler":
        return hostctl.start_sampler(run_dir, args.host, rest)
    if args.command == "drive":
        return hostctl.drive(run_dir)
    if args.command == "reset":
        return hostctl.reset(run_dir)
    if args.command == "stop":
        return hostctl.stop(run_dir, args.grace)
    return hostctl.facts(run_dir, args.host, args.clock_port)


if __name__ == "__main__":
    sys.exit(main())

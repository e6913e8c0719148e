"""Restart a server cmx provisioned on this host, as a fault does: ``python -m
cmx.workloads.host.serverctl restart SERVICE --dir DIR --port PORT [--node NODE] [--unit UNIT]``.

``DIR`` and the names are the server's role's (roles/<service>: ``redis_dir`` and the unit
``cmx-redis-<host>``, ``rabbitmq_base_dir`` and ``rabbitmq_nodename``, ``postgres_data_dir``).
Run here (a local host) or over SSH with the host's venv, as the agent is. Prints one JSON line
(``{"service": ..., "down_s": ...}``) and exits 0 once the server accepts connections again; a
one-line error and exit 1 when it did not stop or come back within ``--timeout``, exit 2 on bad
input.
"""

from __future__ import annotations

import argparse
import json
import sys

from cmx.workloads.servers import registry
from cmx.workloads.servers.base import Place, RestartError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m cmx.workloads.host.serverctl",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("command", choices=["restart"])
    ap.add_argument("service", choices=sorted(registry.SERVERS))
    ap.add_argument("--dir", required=True, help="the server's directory, as its role laid it out")
    ap.add_argument("--port", type=int, required=True, help="the port it listens on")
    ap.add_argument("--node", help="RabbitMQ: the node's name")
    ap.add_argument("--unit", help="Redis under systemd: its transient unit")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds for the stop and the start together")
    args = ap.parse_args(argv)
    place = Place(args.dir, args.port, unit=args.unit, node=args.node)
    try:
        down = registry.get(args.service).restart(place, args.timeout)
    except RestartError as exc:
        print(f"serverctl: {args.service} in {args.dir}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"service": args.service, "down_s": round(down, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which hosts answer when a sweep starts, and which runs cannot go on without one that does not.

A lab of many machines has one down now and then: a worker host that does not answer fails the
runs that need it, each saying which host and why, and the runs that fit on the hosts that answer
go on (engine/run/runner.py asks here before it provisions). One ``ssh … true`` per host, all at
once, each bounded by ssh's own connect timeout (engine/hosts/connection.py) plus a margin.
"""
from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Mapping

from cmx.engine.hosts.connection import CONNECT_TIMEOUT_S, Connection

#: Seconds beyond ssh's connect timeout a host may take to run ``true``.
MARGIN_S = 10.0


def _why(conn: Connection) -> str | None:
    """None when the host answers; else a short reason (ssh's last line)."""
    if conn.local:
        return None
    try:
        proc = subprocess.run([*conn.ssh_argv(), "true"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=CONNECT_TIMEOUT_S + MARGIN_S)
    except subprocess.TimeoutExpired:
        return f"ssh {conn.address}: no answer within {CONNECT_TIMEOUT_S + MARGIN_S:g} s"
    except OSError as exc:  # no ssh client
        return f"ssh {conn.address}: {exc.strerror or exc}"
    if proc.returncode == 0:
        return None
    last = (proc.stderr.strip().splitlines() or [f"ssh exit {proc.returncode}"])[-1]
    return f"ssh {conn.address}: {last}"


def unreachable(conns: Mapping[str, Connection]) -> dict[str, str]:
    """The hosts that do not answer, with why (every host checked at once)."""
    if not conns:
        return {}
    with ThreadPoolExecutor(max_workers=min(len(conns), 32)) as pool:
        found = dict(zip(conns, pool.map(_why, conns.values())))
    return {host: why for host, why in found.items() if why}


def blocked(needs: Mapping[str, Iterable[str]], lost: Mapping[str, str]) -> dict[str, str]:
    """{run id: why it cannot run} for the runs whose hosts (``needs``: run id → hosts) include a
    host that did not answer."""
    out = {}
    for run_id, hosts in needs.items():
        down = [h for h in dict.fromkeys(hosts) if h in lost]
        if down:
            out[run_id] = "; ".join(f"host {h} was unreachable when the sweep started ({lost[h]})" for h in down)
    return out

"""Which hosts answer when a sweep starts, and which runs cannot go on without one that does not.

A lab of many machines has one down now and then: a worker host that does not answer fails the
runs that need it, each saying which host and why, and the runs that fit on the hosts that answer
go on (engine/run/runner.py asks here before it provisions). One ``ssh`` per host, all at once,
each bounded by ssh's own connect timeout (engine/hosts/connection.py) plus a margin; the same
round trip reads the content key the host was provisioned with, so a host that holds the
sweep's is checked by it, not run through a playbook (engine/hosts/provision.py).
"""

from __future__ import annotations

import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Mapping

from cmx.engine.hosts.connection import CONNECT_TIMEOUT_S, Connection

#: Seconds beyond ssh's connect timeout a host that accepted the connection may take to log in
#: and read its key files. A host that is down fails at the connect timeout; one that answers
#: took over 20 s at load average 30 on a 2-core controller (benchmarks/provision.py, 9 hosts at
#: once), which a margin of 10 s counted as down.
MARGIN_S = 30.0


def _ask(conn: Connection, files: list[str]) -> tuple[str | None, str]:
    """(None when the host answers, else a short reason: ssh's last line; what ``files`` hold on
    it, one after the other: "" where none is there)."""
    read = " ".join(shlex.quote(f) for f in files)
    command = f"cat {read} 2>/dev/null; true" if files else "true"  # a missing file is an answer too
    if conn.local:
        argv = ["sh", "-c", command]
        argv = ["sudo", "-n", "-u", conn.become_user, "--", *argv] if conn.become_user else argv
    else:
        argv = [*conn.ssh_argv(), command]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=CONNECT_TIMEOUT_S + MARGIN_S
        )
    except (subprocess.TimeoutExpired, OSError) as exc:
        if conn.local:  # this machine always answers; its key unread, it is provisioned as before
            return None, ""
        if isinstance(exc, subprocess.TimeoutExpired):
            return f"ssh {conn.address}: no answer within {CONNECT_TIMEOUT_S + MARGIN_S:g} s", ""
        return f"ssh {conn.address}: {exc.strerror or exc}", ""  # no ssh client
    if proc.returncode == 0:
        return None, proc.stdout
    if conn.local:
        return None, ""
    last = (proc.stderr.strip().splitlines() or [f"ssh exit {proc.returncode}"])[-1]
    return f"ssh {conn.address}: {last}", ""


def survey(
    conns: Mapping[str, Connection], files: Callable[[Connection], list[str]] = lambda conn: []
) -> tuple[dict[str, str], dict[str, str]]:
    """One round trip per host, every host at once: ({host: why} of those that do not answer,
    {host: the text of its ``files(conn)``} of those that do; provisioning reads the content key
    a host holds so: engine/hosts/provision.py)."""
    if not conns:
        return {}, {}
    with ThreadPoolExecutor(max_workers=min(len(conns), 32)) as pool:
        found = dict(zip(conns, pool.map(lambda c: _ask(c, files(c)), conns.values())))
    return ({h: why for h, (why, _) in found.items() if why}, {h: text for h, (why, text) in found.items() if not why})


def blocked(needs: Mapping[str, Iterable[str]], lost: Mapping[str, str]) -> dict[str, str]:
    """{run id: why it cannot run} for the runs whose hosts (``needs``: run id → hosts) include a
    host that did not answer."""
    out = {}
    for run_id, hosts in needs.items():
        down = [h for h in dict.fromkeys(hosts) if h in lost]
        if down:
            out[run_id] = "; ".join(f"host {h} was unreachable when the sweep started ({lost[h]})" for h in down)
    return out

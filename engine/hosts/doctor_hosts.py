"""``cmx doctor``'s checks of a host, through the connection a sweep uses (engine/hosts/connection.py: a
local process, or the same ``ssh``): reach, the Python its venv would be made from (the controller's
major.minor: the wheelhouse is built for it), ``sudo -n`` where the inventory asks become, free disk
under the work dir, and its clock against the controller's (workloads/host/hostcheck.py runs there).
The checks' lines and their parallel run are engine/hosts/doctor.py's."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from cmx.engine.hosts.connection import CONNECT_TIMEOUT_S, Connection
from cmx.engine.hosts.doctor import FAIL, OK, WARN, Check, Task
from cmx.workloads.host import hostcheck

#: A host needs this much free under its work dir: the venv (~130 MB, more per `package.*` environment) and the runs'
#: artifacts until they are fetched.
MIN_FREE_BYTES = 1 << 30
#: A clock further off than this is corrected, but says the host keeps no time (no NTP).
CLOCK_WARN_S = 1.0
#: Bound of one host's check: ssh's connect timeout, sudo's, the clock's 8 exchanges, the rest.
HOST_BOUND_S = CONNECT_TIMEOUT_S + hostcheck.SUDO_TIMEOUT_S + 15.0


def controller_python() -> str:
    return "%d.%d" % sys.version_info[:2]


def host_task(conn: Connection, clock_port: int, inv_path: str) -> Task:
    return Task("reach", conn.host, HOST_BOUND_S, lambda: check_host(conn, clock_port, inv_path))


def check_host(conn: Connection, clock_port: int, inv_path: str) -> list[Check]:
    args = json.dumps({"workdir": conn.workdir, "become": conn.become_user, "clock_port": clock_port})
    remote = [conn.interpreter, "-", args]
    argv = remote if conn.local else [*conn.ssh_argv(), shlex.join(remote)]
    try:
        proc = subprocess.run(argv, input=hostcheck.script(), capture_output=True, text=True, timeout=HOST_BOUND_S - 2)
    except subprocess.TimeoutExpired:
        proc = None
    except OSError as exc:  # no ssh client, or a local interpreter that is not there
        proc = subprocess.CompletedProcess(argv, 127, "", str(exc))
    reach = Check("reach", conn.host, OK, "local connection (no SSH)" if conn.local else f"ssh {conn.address}")
    if not conn.local and (proc is None or proc.returncode == 255):
        why = "no answer in time" if proc is None else _last_line(proc.stderr) or "ssh exit 255"
        return [
            Check(
                "reach",
                conn.host,
                FAIL,
                f"ssh {conn.address}: {why}",
                f"make `{shlex.join([*conn.ssh_argv(), 'true'])}` work (host up, sshd, key; "
                f"ansible_host, ansible_port, ansible_user in {inv_path})",
            )
        ]
    checks = [reach]
    want = controller_python()
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1]) if proc is not None and proc.returncode == 0 else None
    except (ValueError, IndexError):
        found = None
    if found is None:
        why = (
            "no answer in time"
            if proc is None
            else "not found there"
            if proc.returncode == 127
            else _last_line(proc.stderr) or f"exit {proc.returncode}"
        )
        return checks + [
            Check(
                "python",
                conn.host,
                FAIL,
                f"{conn.interpreter}: {why}",
                f"install python{want} on {conn.host}, or set python_env_interpreter to one",
            )
        ]
    version = found["python"]
    same = version.rsplit(".", 1)[0] == want
    checks.append(
        Check(
            "python",
            conn.host,
            OK if same else FAIL,
            f"{conn.interpreter} is Python {version}",
            ""
            if same
            else f"set python_env_interpreter for {conn.host} to a python{want} "
            "(the controller's: the hosts' wheels are built for it)",
        )
    )
    if conn.become_user:
        checks.append(
            Check(
                "become",
                conn.host,
                OK if found.get("become") else FAIL,
                f"sudo -n -u {conn.become_user}"
                + ("" if found.get("become") else f": {found.get('become_error') or 'refused'}"),
                f"give the connecting user passwordless sudo to {conn.become_user} on {conn.host}, "
                "or drop ansible_become",
            )
        )
    free = found["disk_free"]
    checks.append(
        Check(
            "disk",
            conn.host,
            OK if free >= MIN_FREE_BYTES else FAIL,
            f"{free / (1 << 30):.1f} GiB free under {found['disk_path']} (work dir {conn.workdir})",
            f"free space there, or set cmx_workdir to a disk with {MIN_FREE_BYTES >> 30} GiB free",
        )
    )
    checks.append(_clock(conn.host, found.get("clock")))
    return checks


def _clock(host: str, clock) -> Check:
    offset, uncertainty, how = clock or (None, None, "not measured")
    if offset is None:
        return Check(
            "clock",
            host,
            WARN,
            f"offset unknown ({how})",
            "let UDP from the host reach this machine: latencies across hosts are corrected by it",
        )
    state = WARN if abs(offset) > CLOCK_WARN_S else OK
    return Check(
        "clock",
        host,
        state,
        f"offset {offset * 1000:+.1f} ms ± {uncertainty * 1000:.1f} ms vs this machine",
        "run NTP (chrony or systemd-timesyncd) on the host",
    )


def _last_line(text: str) -> str:
    lines = [s for s in (text or "").strip().splitlines() if s.strip()]
    return lines[-1].strip() if lines else ""

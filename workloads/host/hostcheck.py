"""What ``cmx doctor`` asks each host: its Python, the free disk under its work dir, whether it may
become the inventory's user, and its clock against the controller's.

The host may not be provisioned yet (no venv, no cmx), so the controller sends this module's
source, with ``cmx/workloads/runtime/clock.py``'s, to the host's own interpreter on stdin
(:func:`script`; engine/hosts/doctor.py) and reads one JSON line back. Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: How long ``sudo -n`` may take to say yes or no (it never prompts).
SUDO_TIMEOUT_S = 10


def _existing(path: str) -> str:
    """The work dir, or its nearest existing parent (a host not provisioned yet has none)."""
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def check(workdir: str, become: str | None, clock_port: int | None) -> dict:
    from cmx.workloads.runtime.clock import controller_address, measure

    found: dict = {"python": "%d.%d.%d" % sys.version_info[:3], "disk_path": _existing(workdir)}
    found["disk_free"] = shutil.disk_usage(found["disk_path"]).free
    if become:
        try:
            proc = subprocess.run(
                ["sudo", "-n", "-u", become, "true"],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=SUDO_TIMEOUT_S,
            )
            found["become"], found["become_error"] = (
                proc.returncode == 0,
                (proc.stderr.strip().splitlines() or [""])[-1],
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            found["become"], found["become_error"] = False, str(exc)
    if clock_port:
        found["clock"] = measure(controller_address(), clock_port)
    return found


def main(argv: list[str]) -> None:
    """``ARGS``: JSON ``{"workdir", "become", "clock_port"}``; prints the findings as one JSON line."""
    args = json.loads(argv[0])
    print(json.dumps(check(args["workdir"], args.get("become"), args.get("clock_port"))))


def script() -> str:
    """The program ``python3 - ARGS`` runs on a host: this module and the clock's, loaded from
    their source, without cmx installed there."""
    from cmx.workloads.runtime import clock

    sources = {
        "cmx.workloads.runtime.clock": Path(clock.__file__).read_text(),
        "cmx_hostcheck": Path(__file__).read_text(),
    }
    return (
        "import sys, types\n"
        "for name, src in %r.items():\n"
        "    mod = types.ModuleType(name)\n"
        "    exec(compile(src, name, 'exec'), mod.__dict__)\n"
        "    sys.modules[name] = mod\n"
        "sys.modules['cmx_hostcheck'].main(sys.argv[1:])\n" % sources
    )


if __name__ == "__main__":
    main(sys.argv[1:])

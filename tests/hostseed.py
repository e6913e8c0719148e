"""Host work dirs already provisioned, as a lab host is after an earlier sweep of the same code.

Most multi-host and fault tests are about what a sweep does on its hosts, not about building a
venv on them; building one per test (unpacking ~100 MB of packages a host) was most of
their time. :func:`seed` copies, as hard links, a work dir that ``roles/python_env`` provisioned
once (with cmx's own ``prepare`` and ``provision_hosts``: the real role through Ansible) for this
content key and interpreter; the sweep then finds the key on the host (one ``cat`` over SSH) and
leaves it as it is, which is itself what a second sweep on a lab host does. Tests whose subject is
provisioning (test_multihost, test_provision_check, test_roles_converge, test_installed_wheel,
test_package_environments) start from empty hosts instead.

A copied venv works at its new path: cmx runs ``venv/bin/python -m ...`` (never a script's
shebang), and Python finds the venv by the ``pyvenv.cfg`` beside that link. The controller compiled the
template's byte code, so every copy shares it; a process that writes byte code replaces the file
(a new inode), so no copy ever changes the template.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

#: Templates by (interpreter, content key); kept across sessions (content-keyed, so never stale).
SEEDS = Path("/var/tmp/cmx-test-seeds")
#: What a provisioned work dir holds (roles/python_env).
PARTS = ("venv", "lib")


def _template(interpreter: str) -> Path:
    from cmx.engine.hosts.inventory import load_inventory
    from cmx.engine.hosts.provision import prepare, provision_hosts

    scratch = SEEDS / "controller"
    shipment = prepare(scratch)
    name = hashlib.sha256(f"{interpreter}\n{shipment.key}".encode()).hexdigest()[:16]
    template = SEEDS / name
    if (template / ".complete").exists():
        os.utime(template / ".complete")  # its last use, for _prune
        return template
    part = SEEDS / f"{name}.part-{os.getpid()}"
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    inv = local_inventory(part / "inventory.yml", part / "host", interpreter)
    provision_hosts(load_inventory(inv, secrets_dir=scratch), ["localhost"], scratch, shipment)
    (part / "host" / ".complete").write_text(shipment.key + "\n")
    try:
        (part / "host").rename(template)
    except OSError:  # another test process made the same one first
        if not (template / ".complete").exists():
            raise
    shutil.rmtree(part, ignore_errors=True)
    _prune(keep=template)
    return template


def local_inventory(path: Path, workdir: Path, interpreter: str = sys.executable) -> Path:
    """An inventory of this machine alone (every group), Ansible's local connection, its work dir
    ``workdir``, venvs made from ``interpreter``."""
    path.write_text(
        "\n".join(
            [
                "all:",
                "  vars:",
                "    ansible_connection: local",
                f"    ansible_python_interpreter: {sys.executable}",
                f"    python_env_interpreter: {interpreter}",
                f"    cmx_workdir: {workdir}",
                "  children:",
                "    brokers: {hosts: {localhost: }}",
                "    workers: {hosts: {localhost: }}",
                "    drivers: {hosts: {localhost: }}",
                "",
            ]
        )
    )
    return path


def _prune(keep: Path, days: float = 2) -> None:
    """Templates of other code unused for ``days`` go (each is a venv of ~130 MB)."""
    for old in SEEDS.iterdir():
        done = old / ".complete"
        if old != keep and done.exists() and time.time() - done.stat().st_mtime > days * 86400:
            shutil.rmtree(old, ignore_errors=True)


def seed(workdirs, interpreter: str) -> None:
    """Each of ``workdirs`` (made when missing) holds a provisioned venv and code
    folder for ``interpreter`` (the inventory's ``python_env_interpreter``) and this checkout."""
    template = _template(interpreter)
    for workdir in map(Path, workdirs):
        workdir.mkdir(parents=True, exist_ok=True)
        for name in PARTS:
            if not (workdir / name).exists():  # hard links; a copy where they cannot be (another filesystem)
                if (
                    subprocess.run(
                        ["cp", "-al", str(template / name), str(workdir / name)], capture_output=True
                    ).returncode
                    != 0
                ):
                    shutil.rmtree(workdir / name, ignore_errors=True)
                    subprocess.run(["cp", "-a", str(template / name), str(workdir / name)], check=True)


def seed_local(workdir) -> None:
    """:func:`seed` of one work dir of a local inventory (``python_env_interpreter`` set to
    ``ansible_playbook_python``: the controller's own Python)."""
    seed([workdir], sys.executable)

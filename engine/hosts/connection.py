"""How the controller reaches each host's cmx agent: the host's own Ansible connection variables.

Ansible prepares the hosts (provision.yml); the per-run control goes through one long-lived agent
per host (workloads/host/agent.py, engine/hosts/agents.py), started with the same connection a
playbook would use: a local process for ``ansible_connection: local``, else one ``ssh`` process
built from ``ansible_host``, ``ansible_port``, ``ansible_user``, ``ansible_ssh_private_key_file``,
``ansible_ssh_common_args`` / ``ansible_ssh_extra_args`` and ``ansible_become`` (passwordless
sudo), read and templated by Ansible itself. The command line holds no secret: those travel on
the agent's stdin.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from cmx.engine import paths
from cmx.engine.errors import InputError, Problem

#: Seconds ssh may take to connect (BatchMode: never a prompt).
CONNECT_TIMEOUT_S = 10
#: The variables read here, templated by Ansible (``{{ ansible_playbook_python }}`` and the like).
_VARS = (
    "ansible_connection",
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_ssh_private_key_file",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
    "ansible_become",
    "ansible_become_user",
    "ansible_become_method",
    "ansible_password",
    "ansible_ssh_pass",
    "cmx_workdir",
    "cmx_keep_host_files",
    "celery_worker_ready_timeout",
    "python_env_interpreter",
)
#: The names of this machine itself (a host or a URL named so is reached without SSH).
LOOPBACK = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Connection:
    host: str
    local: bool
    workdir: str
    address: str = ""
    port: int | None = None
    user: str | None = None
    key_file: str | None = None
    ssh_args: tuple[str, ...] = ()
    become_user: str | None = None  # sudo -n -u USER when ansible_become is true
    keep_files: bool = False  # cmx_keep_host_files: the run dir and its pack stay on the host too
    worker_ready_timeout: float = 60.0  # celery_worker_ready_timeout
    interpreter: str = "python3"  # python_env_interpreter: the Python the host's venv is made from

    def agent_command(self, lib_key: str, lease_s: float) -> list[str]:
        """The argv that starts this host's agent (through ssh unless local)."""
        python = f"{self.workdir}/venv/bin/python"
        env = [f"PYTHONPATH={self.workdir}/lib/{lib_key}", "PYTHONDONTWRITEBYTECODE=1", f"CMX_HOST={self.host}"]
        agent = [
            python,
            "-m",
            "cmx.workloads.host.agent",
            "--host",
            self.host,
            "--workdir",
            self.workdir,
            "--lease",
            f"{lease_s:g}",
        ]
        remote = ["env", *env, *agent]
        if self.local:
            return ["sudo", "-n", "-u", self.become_user, "--", *remote] if self.become_user else remote
        command = shlex.join(remote)
        if self.become_user:  # sudo resets the environment: keep the address the clock is measured against
            command = (
                f"sudo -n -u {shlex.quote(self.become_user)} -- env SSH_CLIENT=\"$SSH_CLIENT\" "
                f"SSH_CONNECTION=\"$SSH_CONNECTION\" {command}"
            )
        return [*self.ssh_argv(), command]

    def ssh_argv(self) -> list[str]:
        """``ssh … -- ADDRESS``: the command line that reaches this host (a remote command follows)."""
        ssh = [
            "ssh",
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
        ]
        ssh += ["-p", str(self.port)] if self.port else []
        ssh += ["-l", self.user] if self.user else []
        ssh += ["-i", os.path.expanduser(self.key_file)] if self.key_file else []
        return [*ssh, *self.ssh_args, "--", self.address]


def connections(inventory_path: Path, hosts: list[str]) -> dict[str, Connection]:
    """The connection of each host, from the inventory as Ansible reads it."""
    from ansible.inventory.manager import InventoryManager
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    from cmx.engine.hosts.invvars import plain, vault_loader

    loader = vault_loader()
    manager = InventoryManager(loader=loader, sources=[str(inventory_path)], parse=True)
    variables = VariableManager(loader=loader, inventory=manager)
    found = {}
    for name in hosts:
        host = manager.get_host(name)
        if host is None:
            raise InputError(Problem(f"host '{name}' is not in the inventory", str(inventory_path)))
        hv = variables.get_vars(host=host)
        templar = Templar(loader=loader, variables=hv)
        vals = {}
        for key in _VARS:
            if hv.get(key) is not None:
                try:
                    vals[key] = plain(templar.template(hv[key]))
                except Exception as exc:  # an undefined variable in a template, a vault without password
                    raise InputError(
                        Problem(
                            f"host '{name}': cannot read {key}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}",
                            str(inventory_path),
                        )
                    ) from None
        found[name] = _connection(name, vals, str(inventory_path))
    return found


def _connection(name: str, vals: dict, where: str) -> Connection:
    workdir = str(vals.get("cmx_workdir") or paths.default_workdir(name))
    become = _true(vals.get("ansible_become"))
    common = {
        "keep_files": _true(vals.get("cmx_keep_host_files")),
        "interpreter": str(vals.get("python_env_interpreter") or "python3"),
        "worker_ready_timeout": _seconds(
            name, "celery_worker_ready_timeout", vals.get("celery_worker_ready_timeout", 60), where
        ),
    }
    if become and str(vals.get("ansible_become_method") or "sudo") != "sudo":
        raise InputError(
            Problem(
                f"host '{name}': the cmx agent becomes another user with sudo only "
                f"(ansible_become_method is {vals['ansible_become_method']})",
                where,
            )
        )
    become_user = str(vals.get("ansible_become_user") or "root") if become else None
    conn = vals.get("ansible_connection")
    address = str(vals.get("ansible_host") or name)
    if conn == "local" or (conn is None and address in LOOPBACK):
        return Connection(name, True, workdir, become_user=become_user, **common)
    if conn not in (None, "ssh", "smart", "paramiko", "paramiko_ssh"):
        raise InputError(
            Problem(f"host '{name}': ansible_connection {conn} is not supported by the cmx agent (local or ssh)", where)
        )
    if vals.get("ansible_password") or vals.get("ansible_ssh_pass"):
        raise InputError(
            Problem(
                f"host '{name}': the cmx agent connects with ssh keys only (BatchMode), but the "
                "inventory gives a password: use ansible_ssh_private_key_file or an ssh agent",
                where,
            )
        )
    args: list[str] = []
    for key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if vals.get(key):
            args += shlex.split(str(vals[key]))
    port = vals.get("ansible_port")
    return Connection(
        name,
        False,
        workdir,
        address=address,
        port=int(port) if port else None,
        user=str(vals["ansible_user"]) if vals.get("ansible_user") else None,
        key_file=str(vals["ansible_ssh_private_key_file"]) if vals.get("ansible_ssh_private_key_file") else None,
        ssh_args=tuple(args),
        become_user=become_user,
        **common,
    )


def _true(value) -> bool:
    return str(value).lower() in ("true", "yes", "1", "on")


def _seconds(host: str, key: str, value, where: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 < seconds <= 3600:
        raise InputError(
            Problem(f"host '{host}': {key} must be a number of seconds (up to 3600), got {value!r}", where)
        )
    return seconds

"""Test hosts of our own: network namespaces joined by a bridge, each with its own sshd.

Each namespace reaches nothing but the bridge's subnet (no route out), so the hosts really have
no package index; they share this machine's filesystem, which is why every file a role writes
lives under a per-host work dir. Traffic goes only to these addresses. Needs root, iproute2 and
openssh-server (`.ci/run` installs it).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
#: The Python the hosts' venvs are made with (python_env_interpreter).
HOST_PYTHON = "/usr/bin/python3"


def missing() -> str | None:
    """Why test hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if not shutil.which("ip"):
        return "needs iproute2 (ip)"
    if not Path(SSHD).exists():
        return "needs openssh-server (sshd)"
    return None


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@dataclass
class NetHost:
    name: str
    ns: str
    address: str


#: Tags this process has handed out: every NetHosts gets its own, even one made right after
#: another whose namespaces the kernel is still tearing down.
_TAKEN: set[int] = set()


def _free_tag() -> int:
    """A tag (20..219) no bridge, veth or namespace here uses yet, searched from the pid so that
    concurrent test processes start far apart."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    start = os.getpid() % 200
    for k in range(200):
        tag = (start + k) % 200 + 20
        if (
            tag not in _TAKEN
            and f"cmxbr{tag}" not in links
            and f"cmx{tag}v" not in links
            and f"cmx{tag}h" not in spaces
        ):
            _TAKEN.add(tag)
            return tag
    raise RuntimeError("no free test-host tag: leftover cmx* links or namespaces (ip -o link; ip netns)")


class NetHosts:
    """``n`` hosts ``h1..hn`` at 10.213.X.11.. on bridge ``cmxbrX`` (X free here, unique per instance)."""

    def __init__(self, root: Path, n: int):
        self.root = root
        self.tag = _free_tag()
        self.subnet = f"10.213.{self.tag}"
        self.bridge = f"cmxbr{self.tag}"
        self.hosts = [NetHost(f"h{i}", f"cmx{self.tag}h{i}", f"{self.subnet}.{10 + i}") for i in range(1, n + 1)]
        self.key = root / "id_ed25519"

    def __enter__(self) -> "NetHosts":
        try:
            self._up()
        except Exception:
            self.__exit__()
            raise
        return self

    def _up(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation dir
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        (self.root / "authorized_keys").write_text(Path(f"{self.key}.pub").read_text())
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, h in enumerate(self.hosts, 1):
            outside, inside = f"cmx{self.tag}v{i}", f"cmx{self.tag}p{i}"
            sh("ip", "netns", "add", h.ns)
            sh("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
            sh("ip", "link", "set", inside, "netns", h.ns)
            sh("ip", "link", "set", outside, "master", self.bridge, "up")
            sh("ip", "netns", "exec", h.ns, "ip", "addr", "add", f"{h.address}/24", "dev", inside)
            sh("ip", "netns", "exec", h.ns, "ip", "link", "set", inside, "up")
            sh("ip", "netns", "exec", h.ns, "ip", "link", "set", "lo", "up")
            hostkey = self.root / f"{h.name}_host_key"
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey))
            conf = self.root / f"{h.name}_sshd_config"
            conf.write_text(
                "\n".join(
                    [
                        f"ListenAddress {h.address}",
                        "Port 22",
                        f"HostKey {hostkey}",
                        f"PidFile {self.root}/{h.name}_sshd.pid",
                        "StrictModes no",
                        "UsePAM no",
                        "PasswordAuthentication no",
                        "KbdInteractiveAuthentication no",
                        "PermitRootLogin prohibit-password",
                        f"AuthorizedKeysFile {self.root}/authorized_keys",
                        "Subsystem sftp internal-sftp",
                        "LogLevel ERROR",
                        # Each ssh command runs this machine's root shell set-up (~/.bashrc): where it has
                        # pyenv, that takes pyenv's rehash lock and waits up to 60 s for it, so one session
                        # cut off while it held the lock (a killed controller, a stopped test) left every
                        # later login hanging (seen 2026-11-26). No wait: a held lock skips the rehash.
                        "SetEnv PYENV_REHASH_TIMEOUT=0",
                        "",
                    ]
                )
            )
            sh("ip", "netns", "exec", h.ns, SSHD, "-f", str(conf))
        for h in self.hosts:
            self._wait_ssh(h)

    def _wait_ssh(self, h: NetHost, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection((h.address, 22), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"sshd of {h.name} ({h.address}) did not come up")

    def postgres_dir(self, h: NetHost) -> str:
        """A cluster dir user postgres can reach (not under root's 0700 temp dirs), unique per run."""
        return f"/var/lib/cmx-postgres/test{self.tag}-{h.name}"

    def _kill_all(self, h: NetHost, timeout: float = 10) -> None:
        """SIGKILL every process in the host's namespace and wait (bounded) until none is left."""
        deadline = time.monotonic() + timeout
        while (pids := self.pids(h)) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)

    def pids(self, h: NetHost) -> list[int]:
        """Every process running in the host's namespace."""
        out = subprocess.run(["ip", "netns", "pids", h.ns], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def inventory(
        self,
        path: Path,
        groups: dict[str, list[str]],
        workdir_root: Path,
        seeded: bool = False,
        hostvars: dict[str, dict[str, str]] | None = None,
    ) -> Path:
        """An Ansible inventory (YAML) for these hosts; ``groups`` maps a group to host names.
        ``seeded``: the grouped hosts' work dirs hold a provisioned venv already (tests/hostseed.py),
        for tests whose subject is not provisioning. ``hostvars``: more variables of a host."""
        by_name = {h.name: h for h in self.hosts}
        if seeded:
            from tests.hostseed import seed

            seed(sorted({workdir_root / n for names in groups.values() for n in names if n in by_name}), HOST_PYTHON)
        lines = [
            "all:",
            "  vars:",
            "    ansible_user: root",
            f"    ansible_ssh_private_key_file: {self.key}",
            "    ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
            "-o LogLevel=ERROR",
            "    ansible_python_interpreter: /usr/bin/python3",
            f"    python_env_interpreter: {HOST_PYTHON}",
            "  hosts:",
        ]
        for h in self.hosts:
            lines += [
                f"    {h.name}:",
                f"      ansible_host: {h.address}",
                f"      cmx_workdir: {workdir_root}/{h.name}",
                f"      postgres_data_dir: {self.postgres_dir(h)}",
                f"      rabbitmq_base_dir: /var/lib/cmx-rabbitmq/test{self.tag}-{h.name}",
                f"      rabbitmq_nodename: cmx-test{self.tag}-{h.name}@localhost",
            ]
            lines += [f"      {k}: {v}" for k, v in (hostvars or {}).get(h.name, {}).items()]
        lines.append("  children:")
        for group, names in groups.items():
            lines += [f"    {group}:", "      hosts:"] + [f"        {n}:" for n in names if n in by_name]
        path.write_text("\n".join(lines) + "\n")
        return path

    def __exit__(self, *exc) -> None:
        for i, h in enumerate(self.hosts, 1):
            self._kill_all(h)
            subprocess.run(["ip", "netns", "del", h.ns], capture_output=True)
            # Deleting our end of the pair removes both, even while the kernel still holds the
            # namespace; otherwise the link outlives this instance.
            subprocess.run(["ip", "link", "del", f"cmx{self.tag}v{i}"], capture_output=True)
            shutil.rmtree(self.postgres_dir(h), ignore_errors=True)
            shutil.rmtree(f"/var/lib/cmx-rabbitmq/test{self.tag}-{h.name}", ignore_errors=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

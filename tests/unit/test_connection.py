"""How the controller reaches each host's agent, from the inventory as Ansible reads it (real
Ansible parser; no host is contacted)."""

from __future__ import annotations

import pytest

from cmx.engine.errors import InputError
from cmx.engine.hosts.connection import connections
from tests.conftest import REPO, write


def test_local_hosts_run_the_agent_of_their_work_dir_without_ssh(monkeypatch):
    monkeypatch.delenv("CMX_WORKDIR_ROOT", raising=False)  # the suite sets one per xdist worker
    conn = connections(REPO / "inventory" / "local.yml", ["localhost"])["localhost"]
    assert conn.local and conn.workdir == "/var/tmp/cmx/localhost"
    argv = conn.agent_command("workloads-abc", 20)
    assert argv[:4] == [
        "env",
        "PYTHONPATH=/var/tmp/cmx/localhost/lib/workloads-abc",
        "PYTHONDONTWRITEBYTECODE=1",
        "CMX_HOST=localhost",
    ]
    assert argv[4:] == [
        "/var/tmp/cmx/localhost/venv/bin/python",
        "-m",
        "cmx.workloads.host.agent",
        "--host",
        "localhost",
        "--workdir",
        "/var/tmp/cmx/localhost",
        "--lease",
        "20",
    ]


def test_ssh_hosts_get_one_batch_mode_ssh_from_their_connection_variables(tmp_path):
    inv = write(
        tmp_path / "lab.yml",
        """
        all:
          vars:
            ansible_user: bench
            ansible_ssh_private_key_file: /keys/id
            ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
            cmx_workdir: "/srv/cmx/{{ inventory_hostname }}"
          hosts:
            w1: {ansible_host: 192.0.2.11, ansible_port: 2222, ansible_ssh_extra_args: "-o Compression=no"}
            w2: {ansible_host: 192.0.2.12, ansible_become: true, cmx_keep_host_files: true,
                 celery_worker_ready_timeout: 90}
          children:
            brokers: {hosts: {w1: }}
            workers: {hosts: {w1: , w2: }}
            drivers: {hosts: {w1: }}
    """,
    )
    got = connections(inv, ["w1", "w2"])
    w1, w2 = got["w1"], got["w2"]
    assert not w1.local and w1.workdir == "/srv/cmx/w1" and w2.keep_files and w2.worker_ready_timeout == 90
    argv = w1.agent_command("k", 20)
    assert argv[0] == "ssh" and "BatchMode=yes" in argv and "ConnectTimeout=10" in argv
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-l") + 1] == "bench"
    assert argv[argv.index("-i") + 1] == "/keys/id"
    assert "StrictHostKeyChecking=no" in argv and "Compression=no" in argv
    assert argv[-2:] == [
        "192.0.2.11",
        "env PYTHONPATH=/srv/cmx/w1/lib/k PYTHONDONTWRITEBYTECODE=1 CMX_HOST=w1 "
        "/srv/cmx/w1/venv/bin/python -m cmx.workloads.host.agent --host w1 --workdir /srv/cmx/w1 "
        "--lease 20",
    ]
    remote = w2.agent_command("k", 20)[-1]
    assert remote.startswith("sudo -n -u root -- ") and "cmx.workloads.host.agent --host w2" in remote


def test_what_the_agent_cannot_do_is_one_clear_error(tmp_path):
    inv = write(
        tmp_path / "pw.yml",
        """
        all:
          hosts:
            w1: {ansible_host: 192.0.2.11, ansible_password: secret}
            w2: {ansible_connection: winrm}
    """,
    )
    with pytest.raises(InputError) as info:
        connections(inv, ["w1"])
    assert "w1" in str(info.value) and "keys only" in str(info.value) and "secret" not in str(info.value)
    with pytest.raises(InputError) as info:
        connections(inv, ["w2"])
    assert "winrm" in str(info.value)

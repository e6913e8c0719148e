"""`cmx doctor` against the real services on this machine, a broker URL on a closed loopback port
and an SSH host where nothing listens; `cmx services up` when everything already answers."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import REPO, cmx, write

PASSWORD = "Xq7-doctor-S3cret"


def _inventory(tmp: Path, brokers: str, extra_driver: str = "") -> Path:
    return write(
        tmp / "inv.yml",
        f"""
        all:
          vars:
            ansible_connection: local
            ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"
            python_env_interpreter: "{{{{ ansible_playbook_python }}}}"
            cmx_workdir: {tmp}/work
          children:
            brokers:
              hosts:
                localhost:
                  broker_url:
        {brokers}
            workers:
              hosts:
                localhost:
            drivers:
              hosts:
                localhost:
        {extra_driver}
        """,
    )


def test_doctor_on_the_local_inventory_with_services_up_passes_every_check():
    proc = cmx("doctor", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for what, where in [
        ("reach", "localhost"),
        ("python", "localhost"),
        ("disk", "localhost"),
        ("clock", "localhost"),
        ("broker", "redis://127.0.0.1:6379/0"),
        ("broker", "127.0.0.1:5672"),
        ("backend", "redis://127.0.0.1:6379/1"),
        ("backend", "postgresql://postgres@127.0.0.1:5432/postgres"),
        ("rabbitmq api", ":15672"),
        ("database", "postgresql://postgres@127.0.0.1:5432/postgres"),
    ]:
        assert any(l.startswith(f"✓ {what} ") and where in l for l in lines), (what, where, proc.stdout)
    assert lines[-1].endswith("a sweep can run")
    assert "guest:guest" not in proc.stdout  # the inventory's RabbitMQ credentials


def test_doctor_with_an_experiment_checks_only_what_its_cells_use():
    proc = cmx("doctor", "experiments/quickstart.yaml", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    whats = {l[2:].split("  ")[0].strip() for l in proc.stdout.splitlines()[:-1]}
    assert whats == {"reach", "python", "disk", "clock", "broker redis", "broker rabbitmq", "rabbitmq api"}, proc.stdout


def test_a_broker_on_a_closed_port_fails_naming_it_and_the_fix_without_its_password(tmp_path):
    inv = _inventory(
        tmp_path,
        f"""
                    - redis://127.0.0.1:6379/0
                    - amqp://cmx:{PASSWORD}@127.0.0.1:1//""",
    )
    proc = cmx("doctor", "--inventory", str(inv), timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr
    failed = [l for l in proc.stdout.splitlines() if l.startswith("✗")]
    assert len(failed) == 1, proc.stdout
    assert failed[0].startswith("✗ broker ") and "amqp://cmx:***@127.0.0.1:1//" in failed[0]
    assert (
        "does not answer" in failed[0]
        and "fix: nothing answers on port 1: `cmx services up` starts RabbitMQ" in failed[0]
    )
    assert any(l.startswith("✓ broker ") and "6379" in l for l in proc.stdout.splitlines())


def test_an_ssh_host_where_nothing_listens_fails_naming_the_host(tmp_path):
    inv = _inventory(
        tmp_path,
        "            - redis://127.0.0.1:6379/0",
        """
                far:
                  ansible_connection: ssh
                  ansible_host: 127.0.0.1
                  ansible_port: 1""",
    )
    proc = cmx("doctor", "--inventory", str(inv), timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = [l for l in proc.stdout.splitlines() if l.startswith("✗")]
    assert len(failed) == 1 and failed[0].startswith("✗ reach            far: ssh 127.0.0.1: "), proc.stdout
    assert "fix: make `ssh " in failed[0] and "-p 1 -- 127.0.0.1 true` work" in failed[0]
    assert (
        proc.stdout.splitlines()[-1] == f"{inv}: 1 check(s) failed: a sweep would not run (fix them, then "
        "`cmx doctor` again)"
    )


def test_doctor_refuses_bad_input_in_one_line(tmp_path):
    for args, says in [
        (["doctor", str(tmp_path / "nope.yaml")], "no such experiment file"),
        (["doctor", "--inventory", str(tmp_path / "nope.yml")], "inventory not found"),
    ]:
        proc = cmx(*args)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and says in proc.stderr, proc


def test_services_up_when_all_answer_says_so():
    proc = cmx("services", "up", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == (
        "services up: Redis, RabbitMQ, RabbitMQ management, PostgreSQL already answer on loopback; nothing to start"
    )
    assert (REPO / ".ci" / "services-up").is_file()


def test_doctor_reaches_hosts_over_ssh_and_measures_their_clock(tmp_path):
    """Real hosts (network namespaces with their own sshd, tests/nethosts.py): h1 passes every
    check over SSH, its clock measured over UDP back to this machine; h2 asks become, which needs
    sudo there."""
    import shutil

    from tests.nethosts import NetHosts, missing
    from tests.prereqs import require

    require(missing())
    with NetHosts(tmp_path / "net", 2) as net:
        inv = net.inventory(
            tmp_path / "lab.yml",
            {"brokers": ["h1"], "workers": ["h1", "h2"], "drivers": ["h1"]},
            workdir_root=tmp_path / "hosts",
        )
        inv.write_text(
            inv.read_text().replace(
                f"      ansible_host: {net.hosts[1].address}\n",
                f"      ansible_host: {net.hosts[1].address}\n      ansible_become: true\n",
            )
        )
        proc = cmx("doctor", "--inventory", str(inv), timeout=180)
    lines = proc.stdout.splitlines()
    for what in ("reach", "python", "disk", "clock"):
        assert any(l.startswith(f"✓ {what} ") and " h1: " in l for l in lines), (what, proc.stdout)
    assert any(l.startswith("✓ reach ") and f"h1: ssh {net.hosts[0].address}" in l for l in lines)
    clock = next(l for l in lines if l.startswith("✓ clock ") and " h1: " in l)
    assert "offset " in clock and " ms ± " in clock
    become = next(l for l in lines if " become " in f" {l[2:]}" and " h2: " in l)
    if shutil.which("sudo"):  # root may become anyone
        assert become.startswith("✓ become ") and proc.returncode == 0, proc.stdout
    else:
        assert (
            become.startswith("✗ become ")
            and "fix: give the connecting user passwordless sudo to root on h2" in become
            and proc.returncode == 1
        ), proc.stdout


def test_a_host_python_that_is_not_there_fails_naming_it(tmp_path):
    inv = _inventory(tmp_path, "            - redis://127.0.0.1:6379/0")
    inv.write_text(
        inv.read_text().replace(
            'python_env_interpreter: "{{ ansible_playbook_python }}"', "python_env_interpreter: /nonexistent/python3"
        )
    )
    proc = cmx("doctor", "--inventory", str(inv), timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = [l for l in proc.stdout.splitlines() if l.startswith("✗")]
    assert failed == [
        "✗ python           localhost: /nonexistent/python3: not found there — fix: install python"
        f"{'%d.%d' % sys.version_info[:2]} on localhost, or set python_env_interpreter "
        "to one"
    ], proc.stdout


def test_services_up_starts_what_does_not_answer_and_waits_for_it(tmp_path):
    """In a network namespace of its own (its loopback empty), Redis is started by the same code
    `cmx services up` runs, and answers. (Only Redis: a second RabbitMQ or PostgreSQL on this
    machine would share the running ones' data directories.)"""
    import os
    import signal
    import subprocess

    from tests.nethosts import missing
    from tests.prereqs import require

    require(missing())
    ns = f"cmxsvc{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        code = (
            "from cmx.engine.hosts import localservices as ls\n"
            "ls.LOCAL = tuple(s for s in ls.LOCAL if s.name == 'Redis')\n"
            "assert not ls.answers(6379)\n"
            "print(ls.up(print)); print(ls.answers(6379)); print(ls.up(print))\n"
        )
        proc = subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines() == ["starting Redis (127.0.0.1:6379)", "['Redis']", "True", "[]"]
    finally:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:  # the Redis this test started, in its namespace only
            os.kill(int(pid), signal.SIGTERM)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)

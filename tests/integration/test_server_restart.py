"""A server cmx provisioned is restarted by its server module, from the host side (the command a
fault runs on the server's host, locally or over SSH): it goes down, comes back on its port, and
the command says how long it was down. Unknown servers and servers cmx did not lay out are errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import redis

from tests.faults.brokers import PrivateRedis, free_port
from tests.nethosts import NetHosts

pytestmark = pytest.mark.integration


def serverctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cmx.workloads.host.serverctl", *args], capture_output=True, text=True, timeout=90
    )


def test_a_provisioned_redis_is_restarted_and_answers_again(tmp_path):
    with PrivateRedis(tmp_path / "redis") as server:
        client = redis.Redis(host="127.0.0.1", port=server.port)
        client.set("cmx-restart-probe", "1")
        before = client.info("server")["process_id"]
        done = serverctl("restart", "redis", "--dir", str(server.root), "--port", str(server.port), "--timeout", "30")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["service"] == "redis" and 0 < report["down_s"] < 30
        client = redis.Redis(host="127.0.0.1", port=server.port)
        assert client.info("server")["process_id"] != before  # a new process…
        assert client.get("cmx-restart-probe") is None  # …that kept nothing (no persistence)


def test_a_restart_of_what_cmx_did_not_lay_out_or_does_not_know_fails_plainly(tmp_path):
    done = serverctl("restart", "redis", "--dir", str(tmp_path), "--port", "1")
    assert done.returncode == 1 and "no Redis provisioned by cmx" in done.stderr and "Traceback" not in done.stderr
    done = serverctl("restart", "rabbitmq", "--dir", str(tmp_path), "--port", "1")
    assert done.returncode == 1 and "needs the node's name" in done.stderr
    done = serverctl("restart", "sqs", "--dir", str(tmp_path), "--port", "1")
    assert done.returncode == 2 and "invalid choice: 'sqs'" in done.stderr


@pytest.mark.usefixtures("nethosts_can_be_made")
def test_a_redis_on_another_host_is_restarted_over_ssh(tmp_path):
    """The fault's way: ``serverctl`` on the server's host, through SSH, with the host's Python."""
    with NetHosts(tmp_path / "net", 1) as net:
        (h1,) = net.hosts
        root, port = tmp_path / "h1-redis", free_port()
        root.mkdir()
        (root / "redis.conf").write_text(  # as roles/redis writes it (daemonize: no systemd in a netns)
            f"bind {h1.address}\nport {port}\nprotected-mode no\ndir {root}\npidfile {root}/redis.pid\n"
            f"logfile {root}/redis.log\ndaemonize yes\nsave \"\"\nappendonly no\n"
        )
        subprocess.run(["ip", "netns", "exec", h1.ns, "redis-server", str(root / "redis.conf")], check=True)
        client = lambda: redis.Redis(host=h1.address, port=port, socket_connect_timeout=5)  # noqa: E731
        for _ in range(100):
            try:
                before = client().info("server")["process_id"]
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        else:
            pytest.fail("the Redis on h1 did not come up")
        done = subprocess.run(
            [
                "ssh",
                "-i",
                str(net.key),
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "LogLevel=ERROR",
                "-o",
                "BatchMode=yes",
                f"root@{h1.address}",
                sys.executable,
                "-m",
                "cmx.workloads.host.serverctl",
                "restart",
                "redis",
                "--dir",
                str(root),
                "--port",
                str(port),
                "--timeout",
                "30",
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["service"] == "redis"
        after = client().info("server")["process_id"]
        assert after != before
        assert after in net.pids(h1)  # started again on that host, not here

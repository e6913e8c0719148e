"""A server cmx provisioned is restarted by its server module, from the host side (the command a
fault runs on the server's host, locally or over SSH): it goes down, comes back on its port, and
the command says how long it was down. Unknown servers and servers cmx did not lay out are errors."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import redis

from tests.faults.brokers import PrivateRedis

pytestmark = pytest.mark.integration


def serverctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cmx.workloads.host.serverctl", *args], capture_output=True,
                          text=True, timeout=90)


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
        assert client.info("server")["process_id"] != before   # a new process…
        assert client.get("cmx-restart-probe") is None          # …that kept nothing (no persistence)


def test_a_restart_of_what_cmx_did_not_lay_out_or_does_not_know_fails_plainly(tmp_path):
    done = serverctl("restart", "redis", "--dir", str(tmp_path), "--port", "1")
    assert done.returncode == 1 and "no Redis provisioned by cmx" in done.stderr and "Traceback" not in done.stderr
    done = serverctl("restart", "rabbitmq", "--dir", str(tmp_path), "--port", "1")
    assert done.returncode == 1 and "needs the node's name" in done.stderr
    done = serverctl("restart", "sqs", "--dir", str(tmp_path), "--port", "1")
    assert done.returncode == 2 and "invalid choice: 'sqs'" in done.stderr

"""Private brokers for the fault tests: a Redis and a RabbitMQ node of the test's own, on free
ports, which a test may stop and start again. The machine's shared servers (6379, 5672) are used
by other tests and are never touched.

The RabbitMQ node is a second node of the installed server (its own name, ports, dirs and pid
file, the layout roles/rabbitmq gives a provisioned one); it boots in about 5 s.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from cmx.workloads.servers import registry as servers
from cmx.workloads.servers.base import Place, wait_port


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """``redis-server`` on a free loopback port, configured as roles/redis provisions one
    (no persistence: a restart loses what was queued, as it would for a sweep's own Redis)."""

    def __init__(self, root: Path, bind: str = "127.0.0.1"):
        self.root, self.bind, self.port = root, bind, free_port()
        self.url = f"redis://{bind}:{self.port}/0"
        self.pidfile = root / "redis.pid"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        # Laid out as roles/redis lays out a provisioned one (redis.conf and redis.pid in its dir),
        # so the server module's restart (workloads/servers/redis.py) restarts it as it would that.
        # protected-mode off: reached on a test bridge (tests/nethosts.py), not only on loopback
        (self.root / "redis.conf").write_text(
            f"bind {self.bind}\nport {self.port}\nprotected-mode no\ndir {self.root}\npidfile {self.pidfile}\n"
            f"logfile {self.root / 'redis.log'}\ndaemonize yes\nsave \"\"\nappendonly no\n"
        )
        subprocess.run(["redis-server", str(self.root / "redis.conf")], check=True)
        wait_port(self.bind, self.port, True, 10)

    def stop(self) -> None:
        subprocess.run(
            ["redis-cli", "-h", self.bind, "-p", str(self.port), "shutdown", "nosave"], capture_output=True, timeout=10
        )
        wait_port(self.bind, self.port, False, 10)

    def restart(self) -> None:
        """As a fault restarts a provisioned Redis: its server module, on this host."""
        servers.get("redis").restart(Place(str(self.root), self.port), timeout=30)

    def __enter__(self) -> "PrivateRedis":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class PrivateRabbitMQ:
    """A RabbitMQ node of its own (name, AMQP/management/distribution ports, dirs), started with
    the installed ``rabbitmq-server`` and stopped with ``rabbitmqctl stop``."""

    def __init__(self, tag: str):
        self.node = f"cmx-fault{tag}@localhost"
        self.base = Path(f"/var/lib/cmx-rabbitmq/fault{tag}")  # reachable by user rabbitmq
        self.port, self.api_port, self.dist_port = free_port(), free_port(), free_port()
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}//"
        self.api_url = f"http://guest:guest@127.0.0.1:{self.api_port}"
        self.env = {
            **os.environ,
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_MNESIA_BASE": f"{self.base}/mnesia",
            "RABBITMQ_LOG_BASE": f"{self.base}/log",
            "RABBITMQ_CONFIG_FILE": f"{self.base}/rabbitmq.conf",
            "RABBITMQ_ENABLED_PLUGINS_FILE": f"{self.base}/enabled_plugins",
            "RABBITMQ_PID_FILE": f"{self.base}/rabbitmq.pid",
            "RABBITMQ_DIST_PORT": str(self.dist_port),
        }

    def _ctl(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["rabbitmqctl", "-q", "-n", self.node, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def start(self) -> None:
        subprocess.run(["rabbitmq-server", "-detached"], env=self.env, check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 90
        while self._ctl("await_startup", "--timeout", "5").returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"RabbitMQ node {self.node} did not boot: see {self.base}/log")
            time.sleep(1)
        wait_port("127.0.0.1", self.port, True, 30)

    def stop(self) -> None:
        if self._ctl("stop", f"{self.base}/rabbitmq.pid").returncode != 0:  # it returns once the node exited
            try:
                os.kill(int((self.base / "rabbitmq.pid").read_text()), 9)
            except (OSError, ValueError):
                pass
        wait_port("127.0.0.1", self.port, False, 30)

    def restart(self) -> None:
        """As a fault restarts a provisioned node: its server module, on this host."""
        servers.get("rabbitmq").restart(
            Place(str(self.base), self.port, node=self.node, env={"RABBITMQ_DIST_PORT": str(self.dist_port)}),
            timeout=120,
        )
        wait_port("127.0.0.1", self.port, True, 30)

    def __enter__(self) -> "PrivateRabbitMQ":
        shutil.rmtree(self.base, ignore_errors=True)
        self.base.mkdir(parents=True)
        (self.base / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nmanagement.tcp.ip = 127.0.0.1\n"
            f"management.tcp.port = {self.api_port}\nloopback_users = none\n"
        )
        (self.base / "enabled_plugins").write_text("[rabbitmq_management].\n")
        shutil.chown(self.base, "rabbitmq")
        for f in self.base.iterdir():
            shutil.chown(f, "rabbitmq")
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

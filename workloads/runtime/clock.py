"""Clock offset between a host and the controller, NTP-style over UDP.

The controller answers each 8-byte request with its ``time.time()``; the host sends a few, keeps
the exchange with the shortest round trip, and takes offset = (t0 + t1) / 2 − t_controller with
uncertainty rtt / 2. Cheap (milliseconds), and precise enough to trust or flag cross-host latency.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

REQUEST = struct.Struct("!d")
REPLY = struct.Struct("!dd")


class ClockServer:
    """The controller side: a UDP responder on an ephemeral port, in a daemon thread."""

    def __init__(self, bind: str = "0.0.0.0"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((bind, 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="cmx-clock", daemon=True)

    def __enter__(self) -> "ClockServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(64)
            except (socket.timeout, OSError):
                continue
            if len(data) == REQUEST.size:
                self.sock.sendto(REPLY.pack(REQUEST.unpack(data)[0], time.time()), peer)


def controller_address() -> str:
    """The controller as this host sees it: the SSH client's address, or loopback when local."""
    ssh = os.environ.get("SSH_CLIENT") or os.environ.get("SSH_CONNECTION") or ""
    return ssh.split()[0] if ssh else "127.0.0.1"


def measure(host: str, port: int, samples: int = 8, timeout: float = 0.5) -> tuple[float | None, float | None, str]:
    """(offset_s, uncertainty_s, how): host clock minus controller clock; (None, None, why) if unknown."""
    best = None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        for _ in range(samples):
            t0 = time.time()
            try:
                sock.sendto(REQUEST.pack(t0), (host, port))
                data, _ = sock.recvfrom(64)
            except OSError:
                continue
            t1 = time.time()
            echoed, controller = REPLY.unpack(data)
            if echoed != t0:
                continue
            rtt = t1 - t0
            if best is None or rtt < best[0]:
                best = (rtt, (t0 + t1) / 2 - controller)
    if best is None:
        return None, None, f"no answer from the controller at {host}:{port} (UDP)"
    return best[1], best[0] / 2, f"udp {host}:{port}, best of {samples}"

"""The unit folder's one rule, enforced while its tests run: a unit test opens no network
connection. A test that needs Redis, RabbitMQ, PostgreSQL or a host belongs in
tests/integration (marked ``integration``), where the suite gives it its own database, vhost
and work dir; here it would pass or fail with the machine's services and share them unseen.

The guard wraps ``socket.connect``/``connect_ex`` for Internet sockets (a loopback UDP
"connect", which sends nothing, and Unix sockets stay allowed: the event loop's self-pipe,
multiprocessing). tests/unit/test_layout.py checks the guard holds.
"""

from __future__ import annotations

import socket

import pytest

_INTERNET = (socket.AF_INET, socket.AF_INET6)


class UnitTestOpenedASocket(AssertionError):
    """A unit test tried to reach a server."""


def _guarded(original):
    def connect(self, address, *args):
        if self.family in _INTERNET and self.type == socket.SOCK_STREAM:
            raise UnitTestOpenedASocket(
                f"a unit test connected to {address!r}: tests/unit is for pure code; "
                "move the test to tests/integration (marked integration)"
            )
        return original(self, address, *args)

    return connect


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _guarded(socket.socket.connect))
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded(socket.socket.connect_ex))

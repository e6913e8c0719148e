"""One sweep at a time on a host's work dir (issue 43 point 5): a second sweep waits with one line
naming the first, takes the host when the first ends (or dies), and gives up at its bound."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest

from cmx.engine.errors import HostError
from cmx.engine.hosts import hostlock


def _conn(workdir="/var/tmp/cmx/localhost", local=True, address=None):
    return SimpleNamespace(local=local, workdir=workdir, address=address, user=None, port=None)


@pytest.fixture(autouse=True)
def _own_lock_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CMX_LOCK_DIR", str(tmp_path / "locks"))


def _holder(tmp_path, seconds: float) -> subprocess.Popen:
    """Another controller (a real process) holding localhost's default work dir for ``seconds``."""
    code = textwrap.dedent(f"""
        import sys, time
        from types import SimpleNamespace
        from cmx.engine.hosts.hostlock import HostLocks
        locks = HostLocks({{"experiment": "first", "db": "/tmp/a/cmx.duckdb"}})
        locks.acquire({{"localhost": SimpleNamespace(local=True, workdir="/var/tmp/cmx/localhost", address=None,
                                                     user=None, port=None)}})
        print("held", flush=True)
        time.sleep({seconds})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_the_second_sweep_waits_saying_for_whom_then_goes(tmp_path):
    first = _holder(tmp_path, 2.0)
    said: list[str] = []
    locks = hostlock.HostLocks({"experiment": "second", "db": "/tmp/b/cmx.duckdb"}, wait_s=30, say=said.append)
    t0 = time.monotonic()
    locks.acquire({"localhost": _conn()})
    waited = time.monotonic() - t0
    first.wait(5)
    locks.release()
    assert len(said) == 1, said
    assert "'first'" in said[0] and f"pid {first.pid}" in said[0] and "/tmp/a/cmx.duckdb" in said[0], said
    assert 1.0 < waited < 10, waited


def test_a_killed_sweep_never_leaves_the_host_locked(tmp_path):
    first = _holder(tmp_path, 60.0)
    first.kill()
    first.wait(5)
    locks = hostlock.HostLocks({"experiment": "second"}, wait_s=0, say=lambda line: pytest.fail(line))
    locks.acquire({"localhost": _conn()})
    locks.release()


def test_the_wait_has_a_bound_and_says_how_to_go_on(tmp_path):
    first = _holder(tmp_path, 30.0)
    try:
        said: list[str] = []
        locks = hostlock.HostLocks({"experiment": "second"}, wait_s=1.0, say=said.append)
        with pytest.raises(HostError, match="still in use by the sweep of 'first'.*--host-wait"):
            locks.acquire({"localhost": _conn()})
        assert not locks.held and len(said) == 1
    finally:
        first.kill()
        first.wait(5)


def test_other_work_dirs_and_hosts_are_apart():
    a = hostlock.HostLocks({"experiment": "a"}, wait_s=0, say=lambda line: pytest.fail(line))
    a.acquire({"localhost": _conn()})
    try:
        b = hostlock.HostLocks({"experiment": "b"}, wait_s=0, say=lambda line: pytest.fail(line))
        b.acquire({"localhost": _conn("/tmp/elsewhere"), "h1": _conn(local=False, address="10.0.0.2")})
        b.release()
    finally:
        a.release()
    assert hostlock.key(_conn("/var/tmp/cmx/localhost/")) == hostlock.key(_conn())

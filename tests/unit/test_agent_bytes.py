"""The controller's side of a pack that follows an agent's answer (engine/hosts/agents.py): a
results disk that refuses the bytes must not cost the agent: they are read all the same, so the
stream stays in step, and the failure is noted for the run."""

from __future__ import annotations

import io
import threading

import pytest

from cmx.engine.hosts.agents import Agent, _Pending


def _agent() -> Agent:
    return Agent.__new__(Agent)  # only _take_bytes is used: no process, no connection


def test_the_bytes_land_in_dest(tmp_path):
    pending = _Pending(threading.Event(), tmp_path / "h.tgz")
    out = io.BytesIO(b"0123456789rest")
    _agent()._take_bytes(out, 10, pending)
    assert (tmp_path / "h.tgz").read_bytes() == b"0123456789" and pending.write_error is None
    assert out.read() == b"rest"  # the next answer starts right after the pack


def test_a_dest_that_cannot_be_written_is_noted_and_the_stream_stays_in_step(tmp_path):
    pending = _Pending(threading.Event(), tmp_path / "missing-dir" / "h.tgz")
    out = io.BytesIO(b"0123456789rest")
    _agent()._take_bytes(out, 10, pending)
    assert pending.write_error and "missing-dir" in pending.write_error
    assert out.read() == b"rest"


def test_a_stream_that_ends_inside_a_pack_is_an_error(tmp_path):
    with pytest.raises(OSError, match="inside a pack"):
        _agent()._take_bytes(io.BytesIO(b"012"), 10, _Pending(threading.Event(), tmp_path / "h.tgz"))

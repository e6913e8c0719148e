"""The UDP clock-offset exchange, against a real responder on loopback."""

import socket

from cmx.workloads.runtime.clock import ClockServer, measure


def test_same_clock_measures_zero_offset_with_small_uncertainty():
    with ClockServer(bind="127.0.0.1") as server:
        offset, uncertainty, how = measure("127.0.0.1", server.port)
    assert offset is not None and abs(offset) <= uncertainty + 0.002
    assert 0 <= uncertainty < 0.05
    assert "best of 8" in how


def test_no_responder_means_unknown_not_zero():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but silent
        offset, uncertainty, how = measure("127.0.0.1", port, samples=2, timeout=0.1)
    assert offset is None and uncertainty is None and "no answer" in how

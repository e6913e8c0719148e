"""Units people read: one formatter for the terminal, the report and compare, and the same units read back."""

from __future__ import annotations

import pytest

from cmx.analysis.units import fmt, parse, span


@pytest.mark.parametrize(
    "name, value, shown",
    [
        ("service_time_p50_s", 48e-6, "48 µs"),  # a no-op task's service time, not "0.000 s"
        ("service_time_p50_s", 0.0062, "6.2 ms"),
        ("latency_p99_s", 1.25, "1.25 s"),
        ("makespan_s", 1204.4, "1,204 s"),
        ("latency_p50_s", 0.0, "0 s"),
        ("queue_wait_p50_s", 0.9996, "1 s"),  # not "1e+03 ms"
        ("queue_wait_p50_s", 0.0009996, "1 ms"),
        ("makespan_s", 99.96, "100 s"),
        ("consume_rate", 1750.2, "1,750/s"),
        ("consume_rate", 208_000.0, "208,000/s"),
        ("consume_rate", 0.25, "0.25/s"),
        ("peak_pss_bytes", 20 * 2**20, "20.0 MiB"),
        ("peak_rss_bytes", 3 * 2**30, "3.00 GiB"),
        ("peak_rss_bytes", 812 * 2**10, "812 KiB"),
        ("tasks_lost", 0, "0"),
        ("tasks_lost", None, "–"),
    ],
)
def test_fmt(name, value, shown):
    assert fmt(name, value) == shown


def test_span_writes_the_unit_once():
    assert span("latency_p99_s", 0.0061, 0.007) == "6.1–7 ms"
    assert span("latency_p99_s", 0.0009, 0.002) == "900 µs – 2 ms"


@pytest.mark.parametrize(
    "name, text, value",
    [
        ("peak_pss_bytes", "512MiB", 512 * 2**20),
        ("peak_pss_bytes", "1.5 GiB", 1.5 * 2**30),
        ("peak_pss_bytes", "100MB", 100e6),
        ("latency_p99_s", "250ms", 0.25),
        ("latency_p99_s", "2s", 2.0),
        ("latency_p99_s", "48 µs", 48e-6),
        ("consume_rate", "1.5k/s", 1500.0),
        ("consume_rate", "1,750/s", 1750.0),
        ("consume_rate", "800", 800.0),
        ("tasks_lost", "0", 0.0),
    ],
)
def test_parse_reads_what_fmt_writes(name, text, value):
    assert parse(name, text) == pytest.approx(value)


@pytest.mark.parametrize(
    "name, value",
    [("peak_pss_bytes", 123 * 2**20), ("latency_p99_s", 0.0062), ("consume_rate", 1750.0), ("latency_p99_s", 48e-6)],
)
def test_round_trip(name, value):
    assert parse(name, fmt(name, value)) == pytest.approx(value, rel=0.01)


def test_parse_errors_name_the_accepted_units():
    with pytest.raises(ValueError, match=r"'5 parsecs'.*accepted: µs, us, ms, s"):
        parse("latency_p99_s", "5 parsecs")
    with pytest.raises(ValueError, match="not a number"):
        parse("consume_rate", "fast")

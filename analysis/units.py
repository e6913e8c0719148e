"""Units people read, written and read back in one place: the terminal table, the report, ``cmx
compare`` and ``cmx recommend`` print a metric's value with :func:`fmt` (its unit from the metric
registry), and a constraint such as ``peak_pss_bytes <= 512MiB`` is read with :func:`parse` in the
units an experiment's ``thresholds:`` take (engine/model/thresholds.py).

- times: ``48 µs``, ``6.2 ms``, ``1.25 s``, ``1,204 s`` (never ``0.000 s``);
- rates: ``1,750/s`` (thousands separators), ``0.25/s`` below 10;
- bytes: ``812 KiB``, ``20.0 MiB``, ``3.00 GiB`` (binary, as the kernel and ``size_mb`` count).
"""

from __future__ import annotations

import math
import re

from cmx.engine.model.thresholds import DURATIONS, SIZES
from cmx.engine.results import metricdefs

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
_SCALE = {"k": 1e3, "M": 1e6}
_NUMBER = re.compile(r"^([-+]?[\d,.]+)(\D*)$")
_QUANTITY = re.compile(r"^\s*([-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*([^\d\s].*)?$", re.IGNORECASE)


def fmt_bytes(value: float) -> str:
    if abs(value) >= GIB:
        return f"{value / GIB:,.2f} GiB"
    if abs(value) >= MIB or value == 0:
        return f"{value / MIB:,.1f} MiB"
    return f"{value / KIB:,.0f} KiB"


def fmt_seconds(value: float) -> str:
    """Three significant digits in the unit that keeps them under 1,000 (0.9996 s is "1 s", never "1e+03 ms")."""
    size = abs(value)
    if size == 0:
        return "0 s"
    if size < 0.9995e-6:
        return f"{value * 1e9:.3g} ns"
    if size < 0.9995e-3:
        return f"{value * 1e6:.3g} µs"
    if size < 0.9995:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s" if size < 99.95 else f"{value:,.0f} s"


def fmt_rate(value: float, unit: str = "/s") -> str:
    suffix = unit[unit.index("/") :] if "/" in unit else "/s"
    return f"{value:,.0f}{suffix}" if abs(value) >= 10 else f"{value:,.2f}{suffix}"


def fmt(name: str, value: float | None) -> str:
    """The value in the metric's unit (the registry's)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    unit = metricdefs.get(name).unit
    if unit == "bytes":
        return fmt_bytes(value)
    if metricdefs.is_rate(unit):
        return fmt_rate(value, unit)
    if unit == "s":
        return fmt_seconds(value)
    if unit == "share":
        return f"{value:.2f}"
    return f"{value:,.4g}"


def span(name: str, low: float, high: float) -> str:
    """``6.1–7.0 ms``: an interval with its unit written once (it keeps the table narrow)."""
    lo, hi = fmt(name, low), fmt(name, high)
    a, b = _NUMBER.match(lo), _NUMBER.match(hi)
    if a and b and a.group(2) == b.group(2):
        return f"{a.group(1)}–{hi}"
    return f"{lo} – {hi}"


def parse(name: str, text: str) -> float:
    """``512MiB``, ``2s``, ``250 ms``, ``1.5k/s``, ``0``: a value of metric ``name`` in its stored
    unit (bytes, seconds, per second). ValueError naming the accepted units otherwise."""
    m = _QUANTITY.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a number (with an optional unit)")
    number = float(m.group(1).replace(",", ""))
    suffix = (m.group(2) or "").strip()
    if not suffix:
        return number
    unit = metricdefs.get(name).unit
    if unit == "bytes" and suffix in SIZES:
        return number * SIZES[suffix]
    if unit == "s" and suffix in DURATIONS:
        return number * DURATIONS[suffix]
    if metricdefs.is_rate(unit):
        scale = _SCALE.get(suffix[:1], 1.0) if suffix[:1] in _SCALE else 1.0
        rest = suffix[1:] if suffix[:1] in _SCALE else suffix
        if rest in ("", "/s", unit[unit.index("/") :]):
            return number * scale
    accepted = {"bytes": ", ".join(SIZES), "s": ", ".join(DURATIONS)}.get(
        unit, "k, /s" if metricdefs.is_rate(unit) else "none"
    )
    raise ValueError(f"{text!r}: {suffix!r} is no unit of {name} (its unit: {unit or 'a count'}; accepted: {accepted})")

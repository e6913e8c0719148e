"""Thresholds: ``thresholds: {consume_rate: ">= 800", queue_wait_p99_s: "<= 2s"}`` in an experiment,
checked per cell when a sweep ends. Here: what one threshold is and how it reads (pure); the metric
names and units are checked against the metric registry by cli/checks.py (the model room
does not reach the results room), and the check on the runs is analysis/thresholds.py's."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

#: The comparisons a threshold may make (the median OP the value must hold).
OPERATORS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq}
#: Units a threshold's number may carry, by the kind of metric unit they fit (metricdefs' units);
#: `cmx recommend --where` reads the same (analysis/units.py).
SIZES = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
}
DURATIONS = {"µs": 1e-6, "us": 1e-6, "ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
UNIT_KINDS = {**{u: "bytes" for u in SIZES}, **{u: "s" for u in DURATIONS}}
_OPS = "|".join(re.escape(o) for o in sorted(OPERATORS, key=len, reverse=True))
_UNITS = "|".join(sorted(UNIT_KINDS, key=len, reverse=True))
#: The whole form, also the JSON Schema's pattern.
PATTERN = rf"^\s*({_OPS})\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*({_UNITS})?\s*$"
FORM = "an operator among >=, <=, >, <, == and a number, with an optional unit (512MiB, 2s, 250ms)"


@dataclass(frozen=True)
class Threshold:
    op: str
    value: float  # in the metric's stored unit (bytes, seconds) when a unit was given
    unit: str | None = None  # the unit as written (None: a bare number)

    @property
    def unit_kind(self) -> str | None:
        """The metric unit the written unit fits ('bytes' or 's'), None for a bare number."""
        return UNIT_KINDS.get(self.unit) if self.unit else None

    def holds(self, median: float | None) -> bool:
        """The median meets the threshold (a cell without a median does not)."""
        return median is not None and OPERATORS[self.op](median, self.value)

    def __str__(self) -> str:
        return f"{self.op} {self.value:g}"


def parse(text: str) -> Threshold:
    """``">= 800"``, ``"<= 2s"``, ``"< 512MiB"`` → :class:`Threshold`; ValueError naming the form."""
    match = re.match(PATTERN, text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a threshold: expected {FORM}, e.g. '>= 800' or '<= 2s'")
    op, number, unit = match.groups()
    scale = SIZES.get(unit) or DURATIONS.get(unit) or 1 if unit else 1
    return Threshold(op, float(number) * scale, unit)


def valid(text: str) -> str:
    """Pydantic's check of one threshold's text (kept as written; :func:`parse` reads it)."""
    parse(text)
    return text

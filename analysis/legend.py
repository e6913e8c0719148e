"""The one rule for telling a chart's series apart (issue 28): colour never carries more than
MAX_COLOURS values, so two series never share a colour of the palette.

Of the dimensions that split a chart into series (those with more than one value in its rows):

- when all their combinations fit the palette, colour takes the combination (field LEGEND,
  ``redis / prefork``): one colour per series, one legend to read;
- otherwise colour goes to the one with the most values that still fit the palette (colour is the channel
  the eye separates best, so it takes the busiest dimension it can);
- dash (lines, and the same dimension on the points' shape) goes to the one with the fewest
  values that fit the dash patterns (a dash is readable for a handful of values only);
- every other dimension becomes the panels (facets), joined into one label when there are several.

Every chart builder that colours series takes a :class:`Series` made here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import altair as alt

#: Vega's default categorical palette (tableau10) has ten colours; an eleventh value repeats one.
MAX_COLOURS = 10
#: Dash patterns, solid first; a dimension with more values than this is not dashed.
DASHES = ([1, 0], [6, 3], [2, 2], [10, 3, 2, 3], [1, 4], [14, 5])
SHAPES = ("circle", "square", "triangle-up", "diamond", "cross", "triangle-down")  # as many as DASHES
PANEL = "panel"  # the field holding the joined values when more than one dimension is facetted
LEGEND = "legend"  # the field holding the joined values when their combinations are coloured
#: A legend never cuts a label or its title (Vega-Lite's default cuts at 160 / 180 px: "broker / pool / par…"),
#: so the task name at the end of a long combination stays readable (issue 43).
WHOLE = alt.Legend(labelLimit=0, titleLimit=0)


@dataclass(frozen=True)
class Series:
    color: str | None = None  # fields of the rows (dimension names, or PANEL)
    dash: str | None = None
    facet: str | None = None
    facet_title: str | None = None
    color_title: str | None = None  # when colour holds LEGEND: the dimensions it joins

    def caption(self) -> str:
        """``Colour: pool; dash: broker; panels: concurrency.`` (empty when nothing is split)."""
        said = [
            f"{what}: {name}"
            for what, name in (
                ("colour", self.color_title or self.color),
                ("dash and shape", self.dash),
                ("panels", self.facet_title),
            )
            if name
        ]
        return ("; ".join(said) + ".").capitalize() if said else ""


def _key(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def distinct(rows: list[dict], field: str) -> int:
    """How many different values ``field`` takes in ``rows`` (what a colour scale's domain would hold)."""
    return len({_key(r.get(field)) for r in rows})


def assign(rows: list[dict], dims: list[str], dash: bool = True) -> Series:
    """Where each of ``dims`` goes (see the module docstring). ``dash=False`` for marks that cannot
    be dashed (bars). Rows get a LEGEND or PANEL field (mutated) when several dimensions share a channel."""
    counts = {d: distinct(rows, d) for d in dims}
    split = [d for d in dims if counts[d] > 1]
    if len(split) > 1 and len({tuple(_key(r.get(d)) for d in split) for r in rows}) <= MAX_COLOURS:
        for r in rows:
            r[LEGEND] = _joined(r, split)
        return Series(LEGEND, color_title=" / ".join(split))
    color = max((d for d in split if counts[d] <= MAX_COLOURS), key=lambda d: counts[d], default=None)
    rest = [d for d in split if d != color]
    dashed = min((d for d in rest if counts[d] <= len(DASHES)), key=lambda d: counts[d], default=None) if dash else None
    rest = [d for d in rest if d != dashed]
    if len(rest) > 1:
        for r in rows:
            r[PANEL] = _joined(r, rest)
    facet = PANEL if len(rest) > 1 else (rest[0] if rest else None)
    return Series(color, dashed, facet, " / ".join(rest) or None)


def _joined(row: dict, dims: list[str]) -> str:
    return " / ".join("–" if row.get(d) is None else str(row.get(d)) for d in dims)


def field(name: str) -> str:
    # Dimension names such as "params.size_mb" hold a dot, which Vega-Lite reads as a nested path.
    return name.replace(".", "\\.")


def channels(series: Series) -> dict:
    """The encoding channels (``color``, ``strokeDash``, ``shape``) of ``series``, for ``Chart.encode(**...)``."""
    out = {}
    if series.color:
        out["color"] = alt.Color(
            f"{field(series.color)}:N", title=series.color_title or series.color, sort=None, legend=WHOLE
        )
    if series.dash:
        # The same field on the points' shape too, and only its legend: a line's legend symbol is
        # its point (a dash would not show), and shapes tell series apart where dashes are short.
        out["strokeDash"] = alt.StrokeDash(
            f"{field(series.dash)}:N", title=series.dash, sort=None, scale=alt.Scale(range=list(DASHES)), legend=None
        )
        out["shape"] = alt.Shape(
            f"{field(series.dash)}:N", title=series.dash, sort=None, scale=alt.Scale(range=list(SHAPES)), legend=WHOLE
        )
    return out


def facet(chart, series: Series, columns: int = 4):
    """``chart`` in one panel per value of the series' facet field (the chart itself when none)."""
    if not series.facet:
        return chart
    return chart.facet(facet=alt.Facet(f"{field(series.facet)}:N", title=series.facet_title), columns=columns)

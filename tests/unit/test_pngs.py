"""The report's PNG workers (analysis/pngs.py): the bytes vl-convert draws in the report's own
process, every chart written, and a chart that cannot be drawn fails naming it."""

from __future__ import annotations

import pytest

from cmx.analysis.pngs import Painter, PngError, render

SPECS = {
    f"c{i}": {
        "data": {"values": [{"x": j, "y": j * i} for j in range(5)]},
        "mark": "line",
        "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"}},
    }
    for i in range(3)
}


def test_workers_write_what_vl_convert_draws(tmp_path):
    with Painter(2) as painter:
        for name, spec in SPECS.items():
            painter.paint(spec, tmp_path / f"{name}.png")
        painter.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c0.png", "c1.png", "c2.png"]  # no temporary left
    for name, spec in SPECS.items():
        assert (tmp_path / f"{name}.png").read_bytes() == render(spec)


def test_a_chart_that_cannot_be_drawn_fails_naming_it(tmp_path):
    with pytest.raises(PngError, match="broken.png"), Painter(1) as painter:
        painter.paint({"mark": "no-such-mark"}, tmp_path / "broken.png")
        painter.wait()
    assert not (tmp_path / "broken.png").exists()

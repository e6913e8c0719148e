"""Writes analysis/race_levels.py: the levels of races of 2 to 20 cells, ``min`` 3 to 5 and ``max``
up to 20 runs a cell, calibrated as analysis/racetest.race_alpha calibrates any race (about one
CPU-minute; minutes of wall time on a loaded machine).

    .venv/bin/python benchmarks/race_levels.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from cmx.analysis import racetest

MINS = (3, 4, 5)
TABLE = Path(__file__).resolve().parent.parent / "analysis" / "race_levels.py"


def compute() -> dict[tuple[int, int], tuple[float, ...]]:
    top = racetest.RACE_TABLE_MAX
    levels = {}
    for cells in range(2, top + 1):
        smallest = racetest._race_smallest(cells, top, racetest.RACE_SEQUENCES)
        for min_n in MINS:
            levels[(cells, min_n)] = tuple(
                racetest.race_level_of(smallest, min_n, max_n) for max_n in range(min_n, top + 1)
            )
        print(f"{cells} cells", file=sys.stderr)
    return levels


def _row(key, values) -> list[str]:
    lines, row = [], f"    {key}: ("
    for value in values:
        piece = f"{value:.6g}, "
        if len(row) + len(piece) > 118:
            lines.append(row.rstrip())
            row = "        "
        row += piece
    return [*lines, row.rstrip().rstrip(",") + "),"]


def write(levels: dict[tuple[int, int], tuple[float, ...]]) -> None:
    """The table as analysis/race_levels.py holds it: a few numbers a line (``# fmt: off``: ruff
    would give each its own)."""
    text = TABLE.read_text()
    head = text[: text.index("# fmt: off")]
    rows = [line for key, values in sorted(levels.items()) for line in _row(key, values)]
    body = "\n".join(rows)
    TABLE.write_text(
        f"{head}# fmt: off\nLEVELS: dict[tuple[int, int], tuple[float, ...]] = {{\n{body}\n}}\n# fmt: on\n"
    )


def main() -> None:
    write(compute())


if __name__ == "__main__":
    main()

"""Which cells a sweep runs: ``--only`` selection over the experiment's cells.

The cells themselves come from the model (engine/model/cells.py): planning depends on the model,
never the reverse.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from typing import Any

from cmx.engine.model.cells import Cell, canonical, value_text


def _spellings(name: str, value: Any) -> set[str]:
    """The ways a user may write ``dim=value`` on the command line (heartbeat=0, heartbeat=0.0)."""
    forms = {str(value), canonical(value), json.dumps(value), value_text(value)}  # value_text: as labels show it
    if isinstance(value, float) and value.is_integer():
        forms.add(str(int(value)))
    return {f"{name}={form}" for form in forms}


def cells_for_only(cells: list[Cell], glob: str) -> list[Cell]:
    """Cells selected by ``--only GLOB``: a cell-id glob or a ``dim=value`` glob
    (``pool=gevent``, ``broker=rabbit*``); comma-separated globs must ALL match."""
    patterns = [p.strip() for p in glob.split(",") if p.strip()]

    def selected(cell: Cell) -> bool:
        strings = set().union(*(_spellings(n, v) for n, v in cell.values.items()))
        return all(fnmatchcase(cell.cell_id, p) or any(fnmatchcase(s, p) for s in strings) for p in patterns)

    return [cell for cell in cells if selected(cell)]

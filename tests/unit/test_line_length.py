"""No line of the project's Python over the line length ruff is given in pyproject.toml (issue 41
point 5): long strings and help texts are adjacent literals inside parentheses, argument lists
are broken. ruff's E501 holds it too (make lint); this test says which file and line.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The one limit, where ruff reads it ([tool.ruff] line-length).
LIMIT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["line-length"]
FOLDERS = ("engine", "workloads", "analysis", "cli", "tests", "benchmarks", "docs/hooks")

#: Files allowed over the limit while they are being wrapped (none now); each leaves this set as soon
#: as it fits (test_pending_is_current says so).
PENDING: set[str] = set()


def long_lines(path: Path) -> list[int]:
    """The numbers (from 1) of the lines of ``path`` longer than LIMIT characters."""
    return [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if len(line) > LIMIT]


def _files() -> list[Path]:
    return [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]


def test_the_check_counts_characters_against_the_limit(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("x = 1\n" + "#" * LIMIT + "\n" + "é" * (LIMIT + 1) + "\n", encoding="utf-8")
    assert LIMIT == 120 and long_lines(f) == [3]


def test_no_line_over_the_limit():
    files = _files()
    assert len(files) > 300 and ROOT / "cli" / "cmd_run.py" in files
    over = {str(p.relative_to(ROOT)): lines for p in files if (lines := long_lines(p))}
    unexpected = {p: lines for p, lines in over.items() if p not in PENDING}
    assert not unexpected, f"lines over {LIMIT} characters (file: line numbers): {unexpected}"


def test_pending_is_current():
    """A pending file that fits now (or is gone) is removed, so the set only ever shrinks."""
    fitting = sorted(p for p in PENDING if not (ROOT / p).exists() or not long_lines(ROOT / p))
    assert not fitting, f"remove from PENDING, no line over {LIMIT} left: {fitting}"

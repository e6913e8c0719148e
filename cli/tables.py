"""Tables that fit (issue 43): every table a command prints goes through :func:`show`, which
fits it to the console's width instead of letting rich squeeze it.

- A number is never split: a right-aligned (numeric) column never wraps and is at least as wide
  as its widest line (a median, or the interval under it).
- A text column (a dimension's value, a metric's name) may wrap between words, never inside one
  shorter than :data:`WORD`; one its table marks ``no_wrap`` (a metric's name, a verdict) never
  wraps and is as wide as its widest line.
- When the table is still too wide, columns leave from the right, never the text columns on the left
  (what names a row) nor the ones its caller says stay (compare's verdict); the caption says which
  left and that ``--wide`` shows them all. ``--wide`` prints the whole table at its own width.

The console's width is the terminal's, or ``COLUMNS``, or :data:`LOG_WIDTH` where there is no
terminal (a log gets the same table a terminal of that width would).
"""

from __future__ import annotations

from rich.console import Console
from rich.errors import MarkupError
from rich.table import Table
from rich.text import Text

#: The width of a log (no terminal, no COLUMNS).
LOG_WIDTH = 160
#: A text column folds a word only when it is longer than this.
WORD = 16
#: A header's word (a dimension's name: ``prefetch_multiplier``) folds only when it is longer than this.
HEAD_WORD = 24
WIDE_HELP = "Every column of the table, however wide (by default columns leave from the right until it fits)."


def _plain(cell) -> str:
    if isinstance(cell, Text):
        return cell.plain
    try:
        return Text.from_markup(cell).plain if isinstance(cell, str) else str(cell)
    except MarkupError:  # rich would print it as it stands
        return cell


def _lines(cell) -> list[str]:
    return _plain(cell).split("\n")


def _needs(column, numeric: bool) -> int:
    """The narrowest this column can be: a numeric one (or one that never wraps) its widest line, a
    text one its longest word (up to WORD) and its header's longest word."""
    lines = [line for cell in column._cells for line in _lines(cell)]
    header = _plain(column.header)
    head = max((len(w) for w in header.split()), default=0)
    if column.no_wrap:  # its header does not wrap either
        return max([len(line) for line in [*lines, *header.split("\n")]] + [1])
    if numeric:  # its header may wrap between words (a status table's many counts fit 80 columns)
        return max([len(line) for line in lines] + [min(head, WORD)] + [1])
    words = [len(w) for line in lines for w in line.split()]
    return max([min(max(words, default=1), WORD), min(head, HEAD_WORD), 1])


def leading_text_columns(table: Table) -> int:
    """How many columns on the left are text (what names a row: the dimensions, a metric's name)."""
    n, columns = 0, table.columns
    while n < len(columns) and columns[n].justify == "right":  # a rank before the names
        n += 1
    while n < len(columns) and columns[n].justify != "right":
        n += 1
    return max(n, 1)


def fit(table: Table, width: int, keep: int | None = None, wide: bool = False, stay: tuple[str, ...] = ()) -> Table:
    """``table`` fitted to ``width`` columns (see the module); returns it. ``keep``: the columns on
    the left that never leave (default: the text columns there); ``stay``: the headers of others that never leave."""
    keep = leading_text_columns(table) if keep is None else keep
    for column in table.columns:
        numeric = column.justify == "right"
        need = _needs(column, numeric)
        column.min_width = need
        if numeric or column.no_wrap:
            column.no_wrap, column.overflow = True, "ignore"
        else:
            column.overflow = "fold"
    if wide:
        return table

    def total() -> int:
        return sum(c.min_width + 3 for c in table.columns) + 1  # padding and a border each, one more border

    left = []
    leaving = [i for i in range(keep, len(table.columns)) if _plain(table.columns[i].header) not in stay]
    while total() > width and leaving and len(table.columns) > keep + 1:
        gone = table.columns.pop(leaving.pop())
        left.append(_plain(gone.header))
    if left:
        note = Text(
            f"{len(left)} column(s) left out to fit {width} columns ({', '.join(reversed(left))}): "
            "--wide shows every column",
            style="yellow",
        )
        caption = table.caption
        if caption is None:
            table.caption = note
        else:
            table.caption = Text.assemble(
                caption if isinstance(caption, Text) else Text.from_markup(caption), "\n", note
            )
    return table


def natural_width(table: Table) -> int:
    """How wide ``table`` is with every column at its widest line."""
    console = Console(width=100_000)
    return console.measure(table).maximum


def show(
    console: Console, table: Table, keep: int | None = None, wide: bool = False, stay: tuple[str, ...] = ()
) -> None:
    """Print ``table`` on ``console`` fitted to its width (``wide``: every column, at its own width;
    ``stay``: the headers of columns that never leave)."""
    fit(table, console.width, keep=keep, wide=wide, stay=stay)
    if wide:
        width = max(console.width, natural_width(table))
        Console(file=console.file, width=width, force_terminal=console.is_terminal, no_color=console.no_color).print(
            table
        )
    else:
        console.print(table)

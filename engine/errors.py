"""Errors that reach the user: bad input is reported as ``FILE:LINE:COL: message`` and exits 2."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, with where it is (line and column are 1-based)."""

    message: str
    file: str | None = None
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        where = [p for p in (self.file, self.line, self.col) if p is not None]
        prefix = ":".join(str(p) for p in where)
        message = _one_line(self.message)
        return f"{prefix}: {message}" if prefix else message


# A problem is one line however odd the input it quotes (a key holding a newline, say).
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _one_line(text: str) -> str:
    return _BREAKS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def suggest(word: str, options: Iterable[str], prefix: str = "") -> str:
    """``; did you mean 'NAME'?`` for the known name closest to ``word`` (difflib's), or "" when
    none is close: the one helper every name check (dimension values, workloads, experiments,
    metrics, keys, settings) appends to its one-line message."""
    close = difflib.get_close_matches(str(word), sorted({str(o) for o in options}), n=1)
    return f"; did you mean '{prefix}{close[0]}'?" if close else ""


class InputError(Exception):
    """Bad input (YAML, inventory, CLI arguments): nothing has run. Carries one or more problems."""

    exit_code = 2

    def __init__(self, problems: list[Problem] | Problem | str):
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class HostError(Exception):
    """A host could not be provisioned or reached; names the host and what to do."""

    exit_code = 2

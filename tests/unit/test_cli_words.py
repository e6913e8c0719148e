"""Words a new user reads (issue 43): --version is a flag, not a `<bool>`; ..."""
from __future__ import annotations

from tests.conftest import cmx


def test_version_is_a_flag_in_help():
    proc = cmx("--help", timeout=120)
    [line] = [line for line in proc.stdout.splitlines() if "--version" in line]
    assert "<bool>" not in line, line
    assert cmx("--version", timeout=120).stdout.startswith("cmx ")

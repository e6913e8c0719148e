"""Words a new user reads (issue 43): --version is a flag, not a `<bool>`; the quickstart cites no
file missing from the repository."""

from __future__ import annotations

from tests.conftest import cmx


def test_version_is_a_flag_in_help():
    proc = cmx("--help", timeout=120)
    [line] = [line for line in proc.stdout.splitlines() if "--version" in line]
    assert "<bool>" not in line, line
    assert cmx("--version", timeout=120).stdout.startswith("cmx ")


def test_cmx_flags_are_flags_in_help():
    """Typer labels a flag `<bool>`; cmx's own flags take no value, so they show none."""
    for command, flags in (
        ("run", ("--no-resume", "--new-revision", "--smoke")),
        ("plan", ("--json",)),
        ("compare", ("--pool-cells",)),
    ):
        lines = cmx(command, "--help", timeout=120).stdout.splitlines()
        for flag in flags:
            [line] = [line for line in lines if flag in line and line.strip("│ ").startswith(flag + " ")]
            assert "<bool>" not in line, line


def test_the_quickstart_cites_no_file_missing_from_the_repository():
    import re

    from tests.conftest import REPO

    header = (REPO / "experiments" / "quickstart.yaml").read_text()
    for cited in re.findall(r"[\w./-]+\.(?:md|txt|yaml|py)\b", header):
        assert (REPO / cited).exists() or (REPO / "experiments" / cited).exists(), cited

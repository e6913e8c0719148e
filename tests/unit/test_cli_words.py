"""Words a new user reads (issue 43): --version is a flag, not a `<bool>`; ..."""
from __future__ import annotations

from tests.conftest import cmx


def test_version_is_a_flag_in_help():
    proc = cmx("--help", timeout=120)
    [line] = [line for line in proc.stdout.splitlines() if "--version" in line]
    assert "<bool>" not in line, line
    assert cmx("--version", timeout=120).stdout.startswith("cmx ")


def test_the_quickstart_cites_no_file_missing_from_the_repository():
    import re

    from tests.conftest import REPO

    header = (REPO / "experiments" / "quickstart.yaml").read_text()
    for cited in re.findall(r"[\w./-]+\.(?:md|txt|yaml|py)\b", header):
        assert (REPO / cited).exists() or (REPO / "experiments" / cited).exists(), cited


def test_run_says_the_pitfalls_on_the_terminal_before_any_run(tmp_path):
    """The quickstart's gevent cells on RabbitMQ walk into the heartbeat trap: `cmx run` says so on
    stderr before it runs (here it stops at once: its --db is not a database, so nothing runs)."""
    from tests.conftest import REPO

    bad_db = tmp_path / "not.duckdb"
    bad_db.write_text("not a database")
    proc = cmx("run", str(REPO / "experiments" / "quickstart.yaml"), "--db", str(bad_db), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "warning: 2 of 12 cells walk into 'Broker heartbeats under gevent" in proc.stderr, proc.stderr

"""The results database is sandboxed (issue #14): a file cmx did not write is refused without a
byte written, no connection fetches or loads extensions, and `cmx sql` reads the database only.

Through the real CLI (DuckDB is real; no service is needed)."""

import os
import sqlite3

import duckdb
import pytest

from cmx.engine.results import db
from tests.conftest import cmx
from tests.results_fixture import add_run

QUICKSTART = "experiments/quickstart.yaml"


def _sqlite(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()


def _other_duckdb(path):
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE foo AS SELECT 42 AS x")
    con.close()


def _garbage(path):
    path.write_bytes(b"this is not a database at all\n" * 100)


@pytest.fixture
def ours(tmp_path):
    path = tmp_path / "ours.duckdb"
    with db.connect(path) as con:
        add_run(con, "exp", "r1", {"pool": "solo"}, metrics={"consume_rate": 10.0})
    return path


def _fingerprint(path):
    st = os.stat(path)
    return path.read_bytes(), st.st_mtime_ns, st.st_size


@pytest.mark.parametrize(
    "make, what", [(_sqlite, "SQLite"), (_other_duckdb, "another tool"), (_garbage, "not a DuckDB file")]
)
def test_foreign_files_are_refused_untouched(tmp_path, make, what):
    path = tmp_path / "foreign.duckdb"
    make(path)
    before = _fingerprint(path)
    for args in (["run", QUICKSTART], ["status"], ["sql", "SELECT 1"], ["report", "exp", "--out", str(tmp_path / "r")]):
        proc = cmx(*args, "--db", str(path), timeout=120)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert str(path) in proc.stderr and "not a cmx results database" in proc.stderr
        if args[0] == "run" or what != "another tool":  # read-only commands may say "no runs view"
            assert what in proc.stderr, proc.stderr
        assert _fingerprint(path) == before, f"`cmx {args[0]}` changed the file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.duckdb"]  # no .wal, no report


def test_an_empty_file_is_a_new_database(tmp_path):
    path = tmp_path / "new.duckdb"
    path.write_bytes(b"")
    with db.connect(path) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    with pytest.raises(Exception, match="empty file"):
        path.write_bytes(b"")
        with db.connect(path, read_only=True):
            pass


def test_every_connection_refuses_extension_autoload(ours):
    with db.connect(ours, read_only=True) as con:
        settings = dict(
            con.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN "
                "('autoinstall_known_extensions', 'autoload_known_extensions')"
            ).fetchall()
        )
    assert settings == {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}


@pytest.mark.parametrize(
    "statement",
    [
        "COPY (SELECT 1) TO '{tmp}/out.csv'",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM '/etc/passwd'",
        "ATTACH '{tmp}/other.duckdb' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "EXPORT DATABASE '{tmp}/dump'",
        "CREATE TABLE x (a INT)",
        "INSERT INTO run_ends VALUES ('r9', 'ok', NULL, now(), '{{}}')",
    ],
)
def test_cmx_sql_refuses_what_is_not_reading_the_database(ours, tmp_path, statement):
    before = _fingerprint(ours)
    proc = cmx("sql", statement.format(tmp=tmp_path), "--db", str(ours), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("query: "), line
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ours.duckdb"]  # nothing written beside it
    assert _fingerprint(ours) == before


def test_refusals_say_why(ours):
    proc = cmx("sql", "COPY (SELECT 1) TO '/tmp/cmx-should-not-exist.csv'", "--db", str(ours), timeout=120)
    assert "refused: cmx sql reads the results database only" in proc.stderr
    assert not os.path.exists("/tmp/cmx-should-not-exist.csv")
    proc = cmx("sql", "DELETE FROM run_ends", "--db", str(ours), timeout=120)
    assert "refused: cmx sql does not change the results database" in proc.stderr


@pytest.mark.parametrize("query", ["", "   ", ";", " ; ;", "/* just a comment */"])
def test_cmx_sql_empty(ours, query):
    proc = cmx("sql", query, "--db", str(ours), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == 'query: empty SQL: give a statement, e.g. cmx sql "SELECT * FROM runs LIMIT 5"'


def test_cmx_sql_still_reads(ours):
    proc = cmx(
        "sql",
        "SELECT pool, value FROM metrics JOIN runs USING (run_id)",
        "--db",
        str(ours),
        "--format",
        "csv",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["pool,value", "solo,10.0"]


def test_a_file_copied_over_one_this_process_checked_is_checked_again(tmp_path):
    """A sweep reopens its database without the checks once it checked it; a file written over it
    in place since (same path, same inode: `cp other.duckdb cmx.duckdb`) is another file and is
    refused untouched as any foreign file is."""
    path, other = tmp_path / "cmx.duckdb", tmp_path / "other.duckdb"
    with db.connect(path) as con:
        add_run(con, "exp", "r1", {"pool": "solo"})
    _other_duckdb(other)
    inode = path.stat().st_ino
    path.write_bytes(other.read_bytes())  # in place: the same inode
    assert path.stat().st_ino == inode
    before = path.read_bytes()
    with pytest.raises(Exception) as info:
        with db.connect(path):
            pass
    assert "cmx" in str(info.value)
    assert path.read_bytes() == before

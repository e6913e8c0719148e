"""Results that survive upgrades: a database cmx 0.1.0 wrote (tests/fixtures/cmx-0.1.0.duckdb, see
make_fixture.sh) opens in this cmx; `status`, `report`, `compare` read it, a new sweep appends to
it and every row it held is still there as it was. A database of a newer cmx, or of another tool,
is refused in one line, exit 2, its bytes unchanged."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import duckdb
import pytest

from cmx.engine.results import migrate
from tests.conftest import REPO, cmx

FIXTURE = REPO / "tests" / "fixtures" / "cmx-0.1.0.duckdb"
EXPERIMENT = REPO / "tests" / "fixtures" / "cmx-0.1.0.yaml"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tables(path: Path) -> dict[str, list[str]]:
    """{table: its columns} of a database, read without changing it."""
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() WHERE NOT internal "
            "AND table_name IN (SELECT table_name FROM duckdb_tables()) "
            "ORDER BY column_index"
        ).fetchall()
    out: dict[str, list[str]] = {}
    for table, column in rows:
        out.setdefault(table, []).append(column)
    return out


@pytest.fixture
def old_db(tmp_path) -> Path:
    path = tmp_path / "results" / "cmx.duckdb"
    path.parent.mkdir()
    shutil.copy(FIXTURE, path)
    return path


def test_a_database_of_0_1_0_is_read_then_appended_to_and_keeps_every_row(old_db, tmp_path):
    fixture_digest = _sha(FIXTURE)
    proc = cmx("status", "--db", str(old_db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "fixture" in proc.stdout and " 4 " in proc.stdout  # the 4 runs, all ok

    proc = cmx("report", "fixture", "--db", str(old_db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "2 cells, 4 runs" in proc.stdout and (tmp_path / "reports" / "fixture" / "index.html").is_file()

    proc = cmx("compare", "fixture:broker=redis", "fixture:broker=rabbitmq", "--db", str(old_db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "consume_rate" in proc.stdout and "674/s" in proc.stdout  # rabbitmq's median, as 0.1.0 stored it

    proc = cmx(
        "sql",
        "SELECT count(*) AS n, count(DISTINCT broker) AS brokers FROM run_summary",
        "--db",
        str(old_db),
        "--format",
        "csv",
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and proc.stdout.split() == ["n,brokers", "4,2"], proc.stdout + proc.stderr

    old = _tables(FIXTURE)
    proc = cmx(
        "run",
        str(EXPERIMENT),
        "--inventory",
        str(REPO / "inventory" / "local.yml"),
        "--db",
        str(old_db),
        "--no-resume",
        "--only",
        "broker=redis",
        "--tag",
        "after=upgrade",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    with duckdb.connect(str(old_db), read_only=True) as con:
        con.execute(f"ATTACH '{FIXTURE}' AS before (READ_ONLY)")
        for table, columns in old.items():
            if table == "cmx_schema":  # the versions: a step raises its table's (checked below)
                continue
            cols = ", ".join(f'"{c}"' for c in columns)
            lost = con.execute(
                f'SELECT count(*) FROM (SELECT {cols} FROM before."{table}" EXCEPT ALL SELECT {cols} FROM "{table}")'
            ).fetchone()[0]
            assert lost == 0, f"{table}: {lost} row(s) of 0.1.0 missing or changed"
        versions = dict(con.execute("SELECT table_name, version FROM cmx_schema").fetchall())
        assert versions == migrate.current(), versions  # every step taken, none lowered
        grew = {
            t: con.execute(f'SELECT (SELECT count(*) FROM "{t}") - (SELECT count(*) FROM before."{t}")').fetchone()[0]
            for t in ("sweeps", "run_starts", "run_ends", "tasks", "metrics", "hosts")
        }
        assert (
            grew == {"sweeps": 1, "run_starts": 2, "run_ends": 2, "tasks": 400, "metrics": grew["metrics"], "hosts": 2}
            and grew["metrics"] > 0
        ), grew
    proc = cmx("status", "--db", str(old_db), cwd=tmp_path)
    assert proc.returncode == 0 and " 6 " in proc.stdout, proc.stdout + proc.stderr  # 4 old runs + 2 new
    proc = cmx("status", "--db", str(old_db), "--tag", "after=upgrade", cwd=tmp_path)
    assert proc.returncode == 0 and " 2 " in proc.stdout, proc.stdout + proc.stderr
    assert _sha(FIXTURE) == fixture_digest  # the committed fixture itself is never opened for writing


def _refused(path: Path, tmp_path: Path, says: str) -> None:
    digest = _sha(path)
    for args in (
        ["status"],
        ["report", "fixture"],
        ["sql", "SELECT 1"],
        ["run", str(EXPERIMENT), "--inventory", str(REPO / "inventory" / "local.yml")],
    ):
        proc = cmx(*args, "--db", str(path), cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{path}: ") and says in lines[0], (args, proc.stderr)
        assert _sha(path) == digest, args


def test_a_database_of_a_newer_cmx_is_refused_untouched(old_db, tmp_path):
    with duckdb.connect(str(old_db)) as con:
        con.execute("UPDATE cmx_schema SET version = 99 WHERE table_name = 'tasks'")
    _refused(old_db, tmp_path, "written by a newer cmx (table tasks at version 99; this cmx knows version 1)")


def test_a_database_of_another_tool_is_still_refused_untouched(tmp_path):
    path = tmp_path / "other.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE orders (id INTEGER, total DOUBLE)")
        con.execute("INSERT INTO orders VALUES (1, 9.5)")
    _refused(path, tmp_path, "not a cmx results database")

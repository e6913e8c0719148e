"""Per-table schema versions: steps run once, in order, on a database of an earlier release; a
database of a newer cmx is refused untouched (engine/results/migrate.py)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import duckdb
import pytest

from cmx.engine.errors import InputError
from cmx.engine.results import db, migrate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cmx-0.1.0.duckdb"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def steps(monkeypatch):
    """Replace the steps of the tables the test names (and forget the cached current versions) for
    one test; the other tables keep theirs (the result views read them: faults)."""
    real = migrate.STEPS

    def use(*new: migrate.Step) -> None:
        named = {s.table for s in new}
        monkeypatch.setattr(migrate, "STEPS", tuple(s for s in real if s.table not in named) + tuple(new))
        migrate.current.cache_clear()

    yield use
    migrate.current.cache_clear()


def test_the_steps_of_each_table_chain_up_from_the_baseline():
    baseline = duckdb.connect(":memory:")
    baseline.execute(migrate.SCHEMA_SQL.read_text())
    at = migrate.versions(baseline)
    for step in migrate.STEPS:
        assert step.from_version == at.get(step.table, 0) and step.to_version > step.from_version, step
        at[step.table] = step.to_version
    assert at == migrate.current()


def test_schema_sql_never_lowers_a_version():
    """A later schema change is a Step; a version set in schema.sql with INSERT OR REPLACE would
    undo a step's at every open (and the step would run again)."""
    import re

    text = re.sub(r"--[^\n]*", "", migrate.SCHEMA_SQL.read_text())
    assert not re.search(r"INSERT\s+OR\s+REPLACE\s+INTO\s+cmx_schema", text, re.IGNORECASE), (
        "schema.sql sets a version with INSERT OR REPLACE: add a Step to migrate.STEPS instead"
    )


def test_a_step_runs_once_on_an_old_database_and_keeps_its_rows(tmp_path, steps):
    path = tmp_path / "old.duckdb"
    shutil.copy(FIXTURE, path)
    with duckdb.connect(str(path), read_only=True) as con:
        before = con.execute("SELECT * FROM tasks ORDER BY ALL").fetchall()
        old_version = migrate.versions(con)["tasks"]
    # Without IF NOT EXISTS: a second run of the step would fail, so the test sees it ran once.
    steps(migrate.Step("tasks", old_version, old_version + 1, "ALTER TABLE tasks ADD COLUMN retries INTEGER"))
    with db.connect(path, read_only=True) as con:  # a reader upgrades it, then reads
        assert migrate.versions(con)["tasks"] == old_version + 1
        assert con.execute("SELECT * EXCLUDE (retries) FROM tasks ORDER BY ALL").fetchall() == before
        assert con.execute("SELECT count(*) FROM tasks WHERE retries IS NOT NULL").fetchone() == (0,)
    for read_only in (False, True, False):
        with db.connect(path, read_only=read_only) as con:
            assert migrate.versions(con)["tasks"] == old_version + 1


def test_a_new_database_takes_every_step_and_reopening_changes_no_version(tmp_path, steps):
    # A version in schema.sql must never lower one a step raised (INSERT OR REPLACE would: the
    # step would then run again at every open, and fail).
    steps(
        migrate.Step("sweeps", 2, 3, "ALTER TABLE sweeps ADD COLUMN weather VARCHAR"),
        migrate.Step("runs", 2, 3, "SELECT 1"),
        migrate.Step("weather", 0, 1, "CREATE TABLE weather (run_id VARCHAR, celsius DOUBLE)"),
    )
    path = tmp_path / "new.duckdb"
    for _ in range(3):
        with db.connect(path) as con:
            assert {t: v for t, v in migrate.versions(con).items() if t in ("sweeps", "runs", "weather")} == {
                "sweeps": 3,
                "runs": 3,
                "weather": 1,
            }


def test_a_failing_step_leaves_the_database_as_it_was(tmp_path, steps):
    path = tmp_path / "old.duckdb"
    shutil.copy(FIXTURE, path)
    with duckdb.connect(str(path), read_only=True) as con:
        found = migrate.versions(con)
    steps(
        migrate.Step("tasks", found["tasks"], found["tasks"] + 1, "ALTER TABLE tasks ADD COLUMN a INTEGER"),
        migrate.Step("hosts", found["hosts"], found["hosts"] + 1, "ALTER TABLE no_such_table ADD COLUMN b INTEGER"),
    )
    with pytest.raises(InputError):
        with db.connect(path):
            pass
    with duckdb.connect(str(path), read_only=True) as con:
        assert migrate.versions(con) == found
        assert "a" not in {
            c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'tasks'").fetchall()
        }


@pytest.mark.parametrize(
    "table, version, says",
    [
        ("tasks", 99, "table tasks at version 99; this cmx knows version 1"),
        ("weather", 1, "table weather at version 1; this cmx knows no such table"),
    ],
)
@pytest.mark.parametrize("read_only", [True, False])
def test_a_database_of_a_newer_cmx_is_refused_untouched(tmp_path, table, version, says, read_only):
    path = tmp_path / "newer.duckdb"
    shutil.copy(FIXTURE, path)
    with duckdb.connect(str(path)) as con:
        con.execute("INSERT OR REPLACE INTO cmx_schema VALUES (?, ?)", [table, version])
    digest = _sha(path)
    with pytest.raises(InputError) as info:
        with db.connect(path, read_only=read_only):
            pass
    assert (
        str(info.value) == f"{path}: written by a newer cmx ({says}): open it with that cmx or a later one; "
        "left untouched"
    )
    assert _sha(path) == digest


def test_newer_names_the_first_table_past_what_this_cmx_knows():
    known = {"a": 2, "b": 1}
    assert migrate.newer({"a": 2, "b": 1}, known) is None
    assert migrate.newer({"a": 1}, known) is None  # older: an upgrade, not a refusal
    assert migrate.newer({"a": 3, "b": 1}, known) == ("a", 3, 2)
    assert migrate.newer({"c": 1}, known) == ("c", 1, 0)


def test_an_older_database_that_cannot_be_written_is_named_with_what_to_do(tmp_path, steps, monkeypatch):
    path = tmp_path / "old.duckdb"
    shutil.copy(FIXTURE, path)
    with duckdb.connect(str(path), read_only=True) as con:
        version = migrate.versions(con)["tasks"]
    steps(migrate.Step("tasks", version, version + 1, "ALTER TABLE tasks ADD COLUMN retries INTEGER"))
    migrate.current()  # known before writing fails (a read-only file system, say)

    def cannot_write(con):
        raise duckdb.IOException("Read-only file system")

    monkeypatch.setattr(migrate, "upgrade", cannot_write)
    digest = _sha(path)
    with pytest.raises(InputError) as info:
        with db.connect(path, read_only=True):
            pass
    assert (
        str(info.value) == f"{path}: written by an older cmx: this one adds its columns once, but cannot write "
        "it (Read-only file system): copy it somewhere writable and pass --db with the copy"
    )
    assert _sha(path) == digest

"""The results database file, sandboxed: what cmx will open, and with which DuckDB settings.

``--db`` is input like any other. Before this, a SQLite file made DuckDB try to download its
sqlite extension over the network, and another tool's DuckDB file was altered by ``cmx run``
(schema added) before the error. Now the file's header is checked before DuckDB sees it, a DuckDB
file is opened read-only first to see that cmx wrote it, and no connection may install or load
extensions. ``cmx sql`` also gets no file system (no COPY TO, read_text, ATTACH, INSTALL, LOAD).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from cmx.engine.errors import InputError, Problem
from cmx.engine.results import migrate

#: Every DuckDB file has this at byte 8 (after an 8-byte checksum of its first block).
MAGIC, MAGIC_OFFSET = b"DUCK", 8
#: Settings of every connection: never fetch or load extensions behind the user's back.
CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
#: Run on a ``cmx sql`` connection once its views exist: the query may read the database and
#: nothing else, and cannot switch these back (lock_configuration).
SANDBOX = ("SET enable_external_access = false", "SET lock_configuration = true")
#: Tables only cmx creates: a DuckDB file with tables but none of these is someone else's.
OURS = ("cmx_schema", "run_starts")

_KNOWN = (
    (b"SQLite format 3\0", "a SQLite database"),
    (b"PAR1", "a Parquet file"),
    (b"PK\x03\x04", "a zip file"),
    (b"\x89PNG", "a PNG image"),
    (b"%PDF", "a PDF"),
)


def _refuse(path: Path, what: str) -> InputError:
    return InputError(
        Problem(
            f"cannot open it as a results database: it is {what} (not a cmx results "
            "database), left untouched; pass --db with a DuckDB file that cmx wrote, or a new "
            "path",
            str(path),
        )
    )


def check_header(path: Path, read_only: bool) -> bool:
    """Refuse, without opening it in DuckDB, a path that is not a DuckDB file; True when the
    path is a new database (nothing there yet, or an empty file, say from mktemp)."""
    if not path.exists():
        if read_only:
            raise FileNotFoundError(f"{path}: no results database here yet (run a sweep first, or pass --db)")
        return True
    if not path.is_file():
        raise _refuse(path, "a directory" if path.is_dir() else "not a regular file")
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as exc:
        raise InputError(Problem(f"cannot read it: {exc.strerror or exc}", str(path))) from None
    if not head:
        if read_only:
            raise InputError(Problem("an empty file: no results here yet (run a sweep into it first)", str(path)))
        return True
    if head[MAGIC_OFFSET : MAGIC_OFFSET + len(MAGIC)] != MAGIC:
        what = next((name for magic, name in _KNOWN if head.startswith(magic)), "not a DuckDB file")
        raise _refuse(path, what)
    return False


def check_ours(path: Path) -> dict[str, int]:
    """Refuse a DuckDB file that holds tables but not cmx's, opening it read-only (it is not
    changed); return its tables' versions (``cmx_schema``) for the caller to check. Raises
    duckdb.Error when the file is locked, for the caller to wait and retry."""
    con = duckdb.connect(str(path), read_only=True, config=CONFIG)
    try:
        tables = {
            name
            for (name,) in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE NOT internal AND NOT temporary"
            ).fetchall()
        }
        views = con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal AND NOT temporary").fetchone()[0]
        found = migrate.versions(con)
    finally:
        con.close()
    if (tables or views) and not tables & set(OURS):
        raise _refuse(path, f"a DuckDB database of another tool (tables: {', '.join(sorted(tables)[:5]) or 'none'})")
    return found


def sandbox(con: duckdb.DuckDBPyConnection) -> None:
    """No file system, no extensions, no way back, for the rest of this connection."""
    for statement in SANDBOX:
        con.execute(statement)


def empty_query(query: str) -> Problem | None:
    """A one-line problem when ``query`` holds no statement ("", blanks, a lone ';')."""
    if query.strip().strip(";").strip():
        return None
    return Problem('empty SQL: give a statement, e.g. cmx sql "SELECT * FROM runs LIMIT 5"', "query")


def refusal(exc: duckdb.Error) -> Problem:
    """The one-line answer to a statement DuckDB refused or could not run."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, duckdb.PermissionException) or "configuration has been locked" in first:
        return Problem(
            "refused: cmx sql reads the results database only (no files, COPY TO, read_csv/"
            f"read_text, ATTACH, INSTALL or LOAD; copy the .duckdb file for that): {first}",
            "query",
        )
    if "read-only mode" in first:
        return Problem(
            f"refused: cmx sql does not change the results database (they are append-only): {first}", "query"
        )
    if "Ambiguous reference to column name" in first:  # runs and tasks share run_id's neighbours
        return Problem(
            f"{first}: tables joined here share that column (runs and tasks both have started_at and "
            "finished_at); name it with its table or its alias, e.g. tasks.finished_at, or "
            "t.finished_at - t.started_at for tasks joined as t",
            "query",
        )
    return Problem(first, "query")

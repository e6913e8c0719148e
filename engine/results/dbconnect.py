"""Opening the results database (DuckDB): waiting while another process writes, refusing a file cmx
did not write or a newer cmx wrote, upgrading an older one (cmx.engine.results.migrate), and the views
of the results every connection has (``runs``, ``task_times``). ``cmx.engine.results.db`` is the
module callers import: it re-exports :func:`connect` beside the records a sweep writes."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import duckdb

from cmx.engine.results import dbfile, migrate
from cmx.engine.errors import HostError, InputError, Problem
from cmx.workloads.vocab.dimensions import DIMENSIONS

SQL_DIR = Path(__file__).with_name("sql")

#: Columns of ``runs`` before the dimension columns. ``revision`` (from the run's sweep) tells
#: runs of one experiment under different definitions apart.
RUN_COLUMNS = (
    "experiment",
    "run_id",
    "cell_id",
    "repeat",
    "status",
    "error",
    "started_at",
    "finished_at",
    "workload",
    "revision",
)
#: Built-in dimensions come first among the dimension columns, in the registry's order.
BUILTIN_ORDER = tuple(d.name for d in DIMENSIONS)


def sql(name: str) -> str:
    return (SQL_DIR / name).read_text()


#: Views of the results themselves, installed on every connection: ``task_times.sql`` holds the
#: stamps on the controller's clock (``task_times``, ``queue_depth_times``, ``sample_times``), what
#: ``sql/metrics.sql`` computes from at ingest and every other reader of a stamp reads.
RESULT_VIEWS = ("task_times",)


def install_result_views(con, temporary: bool = False) -> None:
    """Create (or replace) the views of :data:`RESULT_VIEWS`' files; ``temporary``: for this
    connection only (read-only)."""
    for name in RESULT_VIEWS:
        text = sql(f"{name}.sql")
        if temporary:
            text = text.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW")
        con.execute(text)


@contextmanager
def connect(
    path: Path | str,
    read_only: bool = False,
    wait_s: float = 30.0,
    sandboxed: bool = False,
    prepare: Callable[[duckdb.DuckDBPyConnection, bool], None] | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the database, creating its schema if needed; waits while another process writes.
    A file cmx did not write is refused untouched (cmx.engine.results.dbfile); ``sandboxed``: the connection
    can read the database and nothing else (``cmx sql``). ``prepare(con, temporary)`` runs on a
    database that has runs, before the sandbox closes: how a reader adds its own views (stored
    when writable, ``temporary`` for this connection only when read-only); see
    ``cmx.analysis.views.connect``."""
    path = Path(path)
    if not read_only and not sandboxed and prepare is None:
        again = _reopen(path)
        if again is not None:  # checked, upgraded and given its views by this process already
            with _holding(path, again, remember=lambda: True):
                yield again
            return
    new = dbfile.check_header(path, read_only)
    if new and path.exists():
        path.unlink()  # an empty file (mktemp): DuckDB refuses to open one, and it holds nothing
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if not read_only and not new:
                # Read-only first: another tool's file, or a newer cmx's, is never written.
                migrate.refuse_newer(dbfile.check_ours(path), path)
            con = duckdb.connect(str(path), read_only=read_only, config=dbfile.CONFIG)
            break
        except duckdb.Error as exc:
            locked = "lock" in str(exc).lower()
            if locked and time.monotonic() <= deadline:
                time.sleep(0.2)
                continue
            if locked:
                raise InputError(
                    Problem(
                        f"another process has held it for over {wait_s:.0f} s (a sweep "
                        "writing to it?): wait for it, or pass another --db",
                        str(path),
                    )
                )
            raise InputError(
                Problem(
                    f"cannot open it as a results database ({_first_line(exc)}): "
                    "pass --db with a DuckDB file that cmx wrote",
                    str(path),
                )
            ) from None
    if read_only and _older(con, path):
        # Written by an older cmx: upgrade it once (additions only: cmx.engine.results.migrate), then
        # read it as this cmx wrote it.
        con.close()
        try:
            with connect(path, wait_s=wait_s):
                pass
        except (InputError, HostError) as exc:
            root = exc
            while root.__context__ is not None:  # the error of the write itself, under its wrappers
                root = root.__context__
            raise InputError(
                Problem(
                    f"written by an older cmx: this one adds its columns once, but cannot write "
                    f"it ({_first_line(root)}): copy it somewhere writable and pass --db with the "
                    "copy",
                    str(path),
                )
            ) from None
        con = duckdb.connect(str(path), read_only=True, config=dbfile.CONFIG)
    checked = False  # every check passed on a writable connection: it may be reopened without them
    with _holding(path, con, remember=lambda: checked):
        if not read_only:
            try:
                migrate.upgrade(con)
            except duckdb.Error as exc:
                raise InputError(
                    Problem(
                        f"not a cmx results database, or a newer one ({_first_line(exc)}): "
                        "pass --db with a file that cmx wrote",
                        str(path),
                    )
                ) from None
            if not _has_view(con, "runs") or not _has_column(con, "runs", "revision"):
                refresh_runs_view(con)
        elif not _has_view(con, "runs"):
            raise InputError(
                Problem(
                    "not a cmx results database (it has no runs view): run a sweep into "
                    "it, or pass --db with a file that cmx wrote",
                    str(path),
                )
            )
        if _has_view(con, "runs"):
            # Stored when writable, for this connection only when read-only.
            install_result_views(con, temporary=read_only)
            if prepare is not None:
                prepare(con, read_only)
        if sandboxed:
            dbfile.sandbox(con)
        checked = not read_only
        yield con


@contextmanager
def _holding(path: Path, con: duckdb.DuckDBPyConnection, remember: Callable[[], bool]) -> Iterator[None]:
    """Closes ``con`` at the end; a write the disk refused becomes the one-line error that says a
    resume keeps what is stored. ``remember()`` true at the end: the file, as this connection
    left it, may be reopened without the checks (``_reopen``)."""
    try:
        yield
    except Exception as exc:
        if not _cannot_write(exc):
            raise
        raise _write_failed(path, exc) from None
    finally:
        con.close()
        if remember():
            _opened(path)


def _write_failed(path: Path, exc: Exception) -> HostError:
    return HostError(
        f"{path}: cannot write the results database ({_first_line(exc)}): free space "
        f"there, then `cmx run` again resumes; runs already stored are kept"
    )


#: The files this process opened for writing through every check (ours, not newer, upgraded, views
#: installed), by path: the file as this process last closed it (``_identity``). A sweep opens its
#: database several times a run; checking it anew each time (a read-only open, the upgrade's
#: transaction, the views) cost a second a run on a loaded machine.
_CHECKED: dict[str, tuple[int, int, int, int]] = {}


def _opened(path: Path) -> None:
    try:
        st = path.stat()
    except OSError:
        return
    _CHECKED[str(path.resolve())] = _identity(st)


def _identity(st) -> tuple[int, int, int, int]:
    """The file as this process last closed it: a file replaced or rewritten since (a copy over
    it, another process's writes, a reused inode) differs in one of these."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _reopen(path: Path):
    """A writable connection to a file this process checked before and that is still that file
    with this cmx's schema versions (another process may have written it meanwhile: a newer cmx
    that upgraded it is caught here, and the full checks refuse it); None otherwise."""
    key = str(path.resolve())
    try:
        st = path.stat()
    except OSError:
        return None
    if _CHECKED.get(key) != _identity(st):
        return None
    try:
        con = duckdb.connect(str(path), config=dbfile.CONFIG)
    except duckdb.Error:  # locked by another process, or no longer a database: the full way says so
        return None
    try:
        if migrate.versions(con) == migrate.current() and _has_view(con, "runs"):
            return con
    except duckdb.Error:
        pass
    con.close()
    _CHECKED.pop(key, None)
    return None


def _older(con, path: Path) -> bool:
    """True when a cmx database needs this cmx's upgrade; refuses one a newer cmx wrote (InputError,
    ``con`` closed). False for a file without runs: the caller refuses it as not cmx's."""
    try:
        if not _has_view(con, "runs"):
            return False
        found = migrate.versions(con)
        migrate.refuse_newer(found, path)
    except BaseException:
        con.close()
        raise
    return migrate.pending(found) or not _has_column(con, "runs", "revision")


_WRITE_FAILURES = ("No space left on device", "Disk quota exceeded", "Read-only file system")


def _cannot_write(exc: Exception) -> bool:
    """A full or read-only disk under the database (also when a view or the schema was being
    written): one line for the user, not a traceback or a misleading 'not a cmx database'."""
    return isinstance(exc, (duckdb.IOException, duckdb.TransactionException)) or any(
        text in str(exc) for text in _WRITE_FAILURES
    )


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _has_view(con, name: str) -> bool:
    return bool(con.execute("SELECT 1 FROM duckdb_views() WHERE view_name = ? AND NOT internal", [name]).fetchone())


def _has_column(con, table: str, column: str) -> bool:
    return bool(
        con.execute(
            "SELECT 1 FROM duckdb_columns() WHERE table_name = ? AND column_name = ?", [table, column]
        ).fetchone()
    )


def _column_type(json_types: set[str]) -> str:
    """The SQL type of a dimension column from the JSON types its values have had."""
    for ctype, fits in (
        ("BIGINT", {"BIGINT", "UBIGINT"}),
        ("DOUBLE", {"BIGINT", "UBIGINT", "DOUBLE"}),
        ("BOOLEAN", {"BOOLEAN"}),
    ):
        if json_types <= fits:
            return ctype
    return "VARCHAR"  # strings, lists, or a mix: JSON text for lists, the string otherwise


def _dimension_order(name: str) -> tuple:
    if name in BUILTIN_ORDER:
        return (0, BUILTIN_ORDER.index(name), name)
    return (1 if name.startswith("params.") else 2, 0, name)


def refresh_runs_view(con) -> None:
    """(Re)create ``runs``: one row per run, one column per dimension any experiment has used."""
    found: dict[str, set[str]] = {}
    for key, jtype in con.execute(
        "SELECT DISTINCT k, json_type(dims -> k) FROM run_starts, unnest(json_keys(dims)) AS u(k)"
    ).fetchall():
        found.setdefault(key, set()).add(jtype)
    dims = sorted(found, key=_dimension_order)
    dim_cols = []
    for name in dims:
        ctype, quoted = _column_type(found[name]), name.replace("'", "''")
        dim_cols.append(f"""TRY_CAST(s.dims ->> '{quoted}' AS {ctype}) AS "{name.replace('"', '""')}\"""")
    cols = ",\n    ".join(dim_cols)
    con.execute(f"""
CREATE OR REPLACE VIEW runs AS
SELECT s.experiment, s.run_id, s.cell_id, s.repeat,
    coalesce(e.status, 'failed') AS status,
    CASE WHEN e.run_id IS NULL THEN 'no end recorded: the sweep was interrupted or is still running'
         ELSE e.error END AS error,
    s.started_at, e.finished_at, s.workload, coalesce(w.revision, 1) AS revision{',' if cols else ''}
    {cols}
FROM run_starts s LEFT JOIN run_ends e USING (run_id)
LEFT JOIN (SELECT sweep_id, max(revision) AS revision FROM sweeps GROUP BY sweep_id) w USING (sweep_id)""")

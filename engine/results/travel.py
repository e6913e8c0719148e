"""Results that travel: an experiment's sweeps exported as Parquet (one file per table, with a
manifest) and imported into another results database, so the nightly sweeps of several lab
machines meet in one database.

Export: every table's rows that belong to the experiment's sweeps (tables keyed by ``sweep_id``)
or to their runs (keyed by ``run_id``), the sweeps' provenance included (``sweeps`` holds it), and
``manifest.json``: cmx version, each table's version (``cmx_schema``), experiment, sweep ids, row
counts. The folder is written beside its destination and renamed into place, so a half-written
export is never seen as one.

Import: a sweep is identified by its ``sweep_id``. Sweeps the target already holds are skipped
(and said so); the others' rows are inserted in one transaction (all or nothing). Tables only
ever gain columns (cmx.engine.results.migrate), so rows of an export from an older cmx are
inserted by column name and read NULL in the columns added since, as an upgraded database does;
an export from a newer cmx (a table version this cmx does not know) is refused before the target
is opened.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import duckdb

from cmx.engine.errors import InputError, Problem, suggest
from cmx.engine.results import db, headlines, migrate

MANIFEST = "manifest.json"
#: What ``manifest.json`` says it is; ``format_version`` goes up only if its layout changes.
FORMAT, FORMAT_VERSION = "cmx-export", 1
#: The columns that tie a table's rows to a sweep, in the order they are looked for.
KEYS = ("sweep_id", "run_id")
#: Every sweep with its experiment: from ``sweeps``, and from ``run_starts`` for runs whose sweep
#: has no row there (a database written by hand or by tests).
SWEEPS_OF = "SELECT sweep_id, experiment FROM sweeps UNION SELECT sweep_id, experiment FROM run_starts"


@dataclass
class Manifest:
    experiment: str
    cmx_version: str
    versions: dict[str, int]  # every cmx_schema entry of the exporting database
    sweeps: list[str]
    rows: dict[str, int]  # table -> rows exported (each table's file: TABLE.parquet)
    folder: Path = field(default=Path("."))

    def file(self, table: str) -> Path:
        return self.folder / f"{table}.parquet"


@dataclass
class Imported:
    added: list[str]  # sweep ids inserted
    skipped: list[str]  # sweep ids the database held already
    rows: dict[str, int]  # table -> rows inserted


def keyed_tables(con) -> dict[str, str]:
    """``{table: key column}`` of every results table, in name order; a table without a key
    column (``cmx_schema``) does not travel (tests/unit/test_travel.py keeps every other keyed)."""
    rows = con.execute("""SELECT t.table_name, list(c.column_name) FROM duckdb_tables() t
                          JOIN duckdb_columns() c USING (database_name, schema_name, table_name)
                          WHERE NOT t.internal AND NOT t.temporary AND t.schema_name = 'main'
                          GROUP BY t.table_name ORDER BY t.table_name""").fetchall()
    return {name: next(k for k in KEYS if k in cols) for name, cols in rows if any(k in cols for k in KEYS)}


@lru_cache(maxsize=1)
def travelling() -> dict[str, str]:
    """:func:`keyed_tables` of a database of this cmx's schema: the tables an export may hold."""
    con = duckdb.connect(":memory:")
    try:
        migrate.upgrade(con)
        return keyed_tables(con)
    finally:
        con.close()


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def export(db_path: Path | str, experiment: str, out: Path | str, cmx_version: str) -> Manifest:
    """Write ``experiment``'s sweeps from ``db_path`` into the new folder ``out``; InputError
    (nothing written) for an unknown experiment or an ``out`` that exists and is not empty."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(
            Problem(
                "exists and is not an empty folder: give --out a new folder (an export is never written over another)",
                str(out),
            )
        )
    with db.connect(db_path, read_only=True) as con:
        sweeps = [
            s
            for (s,) in con.execute(
                f"SELECT sweep_id FROM ({SWEEPS_OF}) WHERE experiment = ? ORDER BY 1", [experiment]
            ).fetchall()
        ]
        if not sweeps:
            known = [e for (e,) in con.execute(f"SELECT DISTINCT experiment FROM ({SWEEPS_OF}) ORDER BY 1").fetchall()]
            raise InputError(
                Problem(
                    f"no sweep of experiment '{experiment}' here (experiments: "
                    f"{', '.join(known) or 'none'})" + suggest(experiment, known),
                    str(db_path),
                )
            )
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            con.execute("CREATE TEMP TABLE travel_sweeps AS SELECT unnest(?::VARCHAR[]) AS sweep_id", [sweeps])
            con.execute(
                "CREATE TEMP TABLE travel_runs AS SELECT DISTINCT run_id FROM run_starts "
                "WHERE sweep_id IN (SELECT sweep_id FROM travel_sweeps)"
            )
            manifest = Manifest(experiment, cmx_version, migrate.versions(con), sweeps, {}, stage)
            for table, key in keyed_tables(con).items():
                ids = "travel_sweeps" if key == "sweep_id" else "travel_runs"
                query = f'SELECT * FROM "{table}" WHERE "{key}" IN (SELECT {key} FROM {ids})'
                con.execute(f"COPY ({query}) TO {_literal(manifest.file(table))} (FORMAT parquet)")
                manifest.rows[table] = con.execute(f"SELECT count(*) FROM ({query})").fetchone()[0]
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    _write_manifest(manifest)
    if out.exists():
        out.rmdir()  # empty (checked above): the staged folder takes its place
    os.replace(stage, out)
    manifest.folder = out
    return manifest


def _write_manifest(m: Manifest) -> None:
    body = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "cmx_version": m.cmx_version,
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "experiment": m.experiment,
        "sweeps": m.sweeps,
        "versions": dict(sorted(m.versions.items())),
        "tables": {t: {"file": m.file(t).name, "rows": n, "version": m.versions.get(t)} for t, n in m.rows.items()},
    }
    (m.folder / MANIFEST).write_text(json.dumps(body, indent=2) + "\n")


def read_manifest(folder: Path | str) -> Manifest:
    """The export in ``folder``, checked: InputError naming what is wrong and where."""
    folder = Path(folder)
    if not folder.is_dir():
        what = "no such folder" if not folder.exists() else "not a folder"
        raise InputError(Problem(f"{what}: give the folder `cmx export --out` wrote", str(folder)))
    path = folder / MANIFEST
    if not path.is_file():
        raise InputError(
            Problem(f"not a cmx export (no {MANIFEST}): give the folder `cmx export --out` wrote", str(folder))
        )
    try:
        body = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(Problem(f"cannot read it as a cmx export manifest ({exc})", str(path))) from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise InputError(Problem(f"not a cmx export manifest (no \"format\": \"{FORMAT}\")", str(path)))
    if not isinstance(body.get("format_version"), int) or body["format_version"] > FORMAT_VERSION:
        raise InputError(
            Problem(
                f"export format {body.get('format_version')!r} is newer than this cmx reads "
                f"({FORMAT_VERSION}): import it with the cmx that wrote it "
                f"({body.get('cmx_version')}) or a later one; nothing imported",
                str(path),
            )
        )
    try:
        versions = {str(t): int(v) for t, v in body["versions"].items()}
        rows = {str(t): int(spec["rows"]) for t, spec in body["tables"].items()}
        sweeps = [str(s) for s in body["sweeps"]]
        manifest = Manifest(
            str(body["experiment"]), str(body.get("cmx_version") or "unknown"), versions, sweeps, rows, folder
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(Problem(f"not a cmx export manifest (bad or missing {exc})", str(path))) from None
    _check_versions(manifest, path)
    stray = sorted(set(rows) - set(travelling()))
    if stray or "sweeps" not in rows or "run_starts" not in rows:
        what = f"table {stray[0]} is not one that travels" if stray else "sweeps and run_starts are both needed"
        raise InputError(Problem(f"not a cmx export manifest ({what})", str(path)))
    missing = [manifest.file(t).name for t in rows if not manifest.file(t).is_file()]
    if missing:
        raise InputError(Problem(f"incomplete export: {', '.join(missing)} missing; export it again", str(folder)))
    return manifest


def _check_versions(m: Manifest, path: Path) -> None:
    """Refuse tables this cmx does not know, or knows at a lower version (a newer cmx exported)."""
    for table in m.rows:
        if table not in m.versions:
            raise InputError(Problem(f"table {table} has no version in the manifest", str(path)))
    reason = migrate.newer_reason(m.versions)
    if reason:
        raise InputError(
            Problem(
                f"exported by a newer cmx ({m.cmx_version}: {reason}): import it with that cmx "
                "or a later one; nothing imported",
                str(path),
            )
        )


def import_export(folder: Path | str, db_path: Path | str) -> Imported:
    """Merge the export in ``folder`` into ``db_path`` (created when new): the sweeps it does not
    hold yet, every table's rows of them, in one transaction."""
    m = read_manifest(folder)
    with db.connect(db_path) as con:  # upgraded on open: it has every table of travelling()
        con.execute("BEGIN TRANSACTION")
        try:
            result = _insert(con, m, travelling())
            if result.added:
                db.refresh_runs_view(con)  # new dimension columns, if the imported runs brought any
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return result


def _read(con, m: Manifest, table: str, what: str) -> duckdb.DuckDBPyRelation:
    try:
        return con.execute(f"SELECT {what} FROM read_parquet({_literal(m.file(table))})")
    except duckdb.Error as exc:
        raise InputError(
            Problem(f"cannot read it as Parquet ({db._first_line(exc)}); export it again", str(m.file(table)))
        ) from None


def _insert(con, m: Manifest, tables: dict[str, str]) -> Imported:
    for table, n in m.rows.items():
        found = _read(con, m, table, "count(*)").fetchone()[0]
        if found != n:
            raise InputError(Problem(f"holds {found} rows, the manifest says {n}: export it again", str(m.file(table))))
    try:
        incoming = con.execute(f"""SELECT sweep_id, experiment, workload FROM read_parquet({_literal(m.file('sweeps'))})
                                   UNION SELECT sweep_id, experiment, workload
                                   FROM read_parquet({_literal(m.file('run_starts'))})""").fetchall()
    except duckdb.Error as exc:
        raise InputError(
            Problem(f"not a cmx export: its sweeps or runs do not read ({db._first_line(exc)})", str(m.folder))
        ) from None
    stray = sorted({e for _, e, _ in incoming} - {m.experiment})
    if stray:
        raise InputError(
            Problem(
                f"holds sweeps of {', '.join(stray)}, not only of {m.experiment}: not an export cmx wrote",
                str(m.folder),
            )
        )
    present = {
        s
        for (s,) in con.execute(
            f"SELECT sweep_id FROM ({SWEEPS_OF}) WHERE sweep_id IN (SELECT unnest(?))", [[s for s, _, _ in incoming]]
        ).fetchall()
    }
    added = sorted({s for s, _, _ in incoming} - present)
    skipped = sorted({s for s, _, _ in incoming} & present)
    if not added:
        return Imported([], skipped, {})
    workload = con.execute(
        "SELECT workload FROM run_starts WHERE experiment = ? AND workload NOT IN (SELECT unnest(?)) LIMIT 1",
        [m.experiment, sorted({w for _, _, w in incoming})],
    ).fetchone()
    if workload:
        raise InputError(
            Problem(
                f"experiment name '{m.experiment}' is taken here by sweeps of workload "
                f"'{workload[0]}', the export's are of another: import into another --db",
                str(m.folder),
            )
        )
    con.execute("CREATE OR REPLACE TEMP TABLE travel_sweeps AS SELECT unnest(?::VARCHAR[]) AS sweep_id", [added])
    _check_revisions(con, m)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE travel_runs AS SELECT DISTINCT run_id
                    FROM read_parquet({_literal(m.file('run_starts'))})
                    WHERE sweep_id IN (SELECT sweep_id FROM travel_sweeps)""")
    clash = con.execute(
        "SELECT run_id FROM run_starts WHERE run_id IN (SELECT run_id FROM travel_runs) LIMIT 1"
    ).fetchone()
    if clash:
        raise InputError(
            Problem(
                f"run {clash[0]} of a new sweep is already here under another sweep: the two "
                "databases share run ids, so their rows cannot be told apart; nothing imported",
                str(m.folder),
            )
        )
    rows = {}
    for table in sorted(m.rows):
        key = tables[table]
        ids = "travel_sweeps" if key == "sweep_id" else "travel_runs"
        try:
            rows[table] = con.execute(
                f'INSERT INTO "{table}" BY NAME SELECT * FROM read_parquet({_literal(m.file(table))}) '
                f'WHERE "{key}" IN (SELECT {key} FROM {ids})'
            ).fetchone()[0]
        except duckdb.Error as exc:
            raise InputError(
                Problem(f"does not fit table {table} ({db._first_line(exc)}); nothing imported", str(m.file(table)))
            ) from None
    headlines.backfill(con)  # runs of an export from a cmx that did not store them
    return Imported(added, skipped, rows)


def _check_revisions(con, m: Manifest) -> None:
    """Revisions are numbered per database (cmx.engine.run.provenance.revision_for): a new sweep
    whose revision number stands here for another definition would have its runs pooled with runs
    of that other definition, so it is refused (the two machines ran different experiments)."""
    con.execute("CREATE OR REPLACE TEMP TABLE travel_in AS SELECT * FROM main.sweeps LIMIT 0")
    con.execute(f"INSERT INTO travel_in BY NAME SELECT * FROM read_parquet({_literal(m.file('sweeps'))})")
    clash = con.execute("""
        SELECT i.sweep_id, coalesce(i.revision, 1), i.definition_hash, t.definition_hash
        FROM travel_in i JOIN main.sweeps t ON t.experiment = i.experiment
            AND coalesce(t.revision, 1) = coalesce(i.revision, 1) AND t.definition_hash <> i.definition_hash
        WHERE i.sweep_id IN (SELECT sweep_id FROM travel_sweeps) LIMIT 1""").fetchone()
    if clash:
        sweep, revision, theirs, ours = clash
        raise InputError(
            Problem(
                f"sweep {sweep} is revision {revision} of '{m.experiment}' under another definition "
                f"({theirs[:12]}) than this database's revision {revision} ({ours[:12]}): their "
                "runs would be pooled; import into another --db, or run one machine's experiment "
                "under another name; nothing imported",
                str(m.folder),
            )
        )

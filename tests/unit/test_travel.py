"""`cmx export` / `cmx import` (issue 26, point 6): an experiment's sweeps as Parquet, merged into
another results database without duplicating a sweep, so the nights of several lab machines meet
in one database. Real DuckDB files; the committed 0.1.0 fixture is copied, never opened in place."""

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from cmx.engine.results import db, migrate, travel
from tests.conftest import cmx
from tests.results_fixture import add_run, build_matrix

FIXTURE = Path(__file__).parents[1] / "fixtures" / "cmx-0.1.0.duckdb"


def rows_of(path: Path) -> dict[str, list]:
    """Every table's rows, sorted, as DuckDB reads them (JSON as text)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"').fetchall())) for t in travel.keyed_tables(con)}
    finally:
        con.close()


def one_line_exit_2(proc) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    [line] = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr
    return line


def sweep(con, sweep_id: str, experiment: str = "exp", host: str = "lab1") -> None:
    db.record_sweep(
        con,
        sweep_id,
        experiment,
        f"/{host}/exp.yaml",
        "throughput",
        "",
        f"/{host}/inv.yml",
        {"name": experiment},
        provenance={"cmx_version": "0.2.0", "git_commit": "abc123"},
        tags={"machine": host},
    )
    db.record_controller(con, sweep_id, host, 1, 0.0)


@pytest.fixture
def source(tmp_path) -> Path:
    path = build_matrix(tmp_path / "a.duckdb")
    with db.connect(path) as con:
        sweep(con, "s1")
        con.execute("INSERT INTO hosts (run_id, host, cpu_model, cores) SELECT run_id, 'w1', 'Xeon', 2 FROM run_starts")
        con.execute("INSERT INTO threshold_checks VALUES ('s1', 'c', 'consume_rate', '>=', 1, 2, 3, true)")
    return path


def test_every_table_travels_but_cmx_schema(tmp_path):
    with db.connect(tmp_path / "new.duckdb") as con:
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal").fetchall()}
        assert set(travel.keyed_tables(con)) == set(travel.travelling()) == tables - {"cmx_schema"}


def test_export_then_import_gives_the_same_rows(source, tmp_path):
    proc = cmx("export", "exp", "--out", str(tmp_path / "ex"), "--db", str(source), timeout=120)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "ex" / "manifest.json").read_text())
    assert manifest["experiment"] == "exp" and manifest["sweeps"] == ["s1"] and manifest["cmx_version"]
    assert manifest["versions"]["sweeps"] == migrate.current()["sweeps"] and manifest["tables"]["tasks"]["rows"] == 160
    assert sorted(p.name for p in (tmp_path / "ex").glob("*.parquet")) == sorted(
        f"{t}.parquet" for t in manifest["tables"]
    )
    proc = cmx("import", str(tmp_path / "ex"), "--db", str(tmp_path / "b.duckdb"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "imported 1 sweep(s) (s1)" in proc.stdout
    assert rows_of(tmp_path / "b.duckdb") == rows_of(source)
    assert rows_of(source)["sweeps"] and rows_of(source)["threshold_checks"] and rows_of(source)["hosts"]


def test_the_release_fixture_travels_whole(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "old.duckdb")
    travel.export(tmp_path / "old.duckdb", "fixture", tmp_path / "ex", "test")
    travel.import_export(tmp_path / "ex", tmp_path / "new.duckdb")
    copied, merged = rows_of(tmp_path / "old.duckdb"), rows_of(tmp_path / "new.duckdb")
    assert merged == copied and len(copied["tasks"]) > 0 and len(copied["worker_config"]) > 0


def test_importing_twice_adds_nothing_the_second_time(source, tmp_path):
    travel.export(source, "exp", tmp_path / "ex", "test")
    target = tmp_path / "b.duckdb"
    assert cmx("import", str(tmp_path / "ex"), "--db", str(target), timeout=120).returncode == 0
    before = rows_of(target)
    proc = cmx("import", str(tmp_path / "ex"), "--db", str(target), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "skipped sweep s1: already in" in proc.stdout and "nothing to import" in proc.stdout
    assert rows_of(target) == before


def lab(path: Path, sweep_id: str, broker: str, rates) -> Path:
    """One lab machine's database: one sweep of experiment nightly, a cell of ``broker``."""
    with db.connect(path) as con:
        sweep(con, sweep_id, "nightly", host=sweep_id)
        for i, rate in enumerate(rates):
            add_run(
                con,
                "nightly",
                f"{sweep_id}-{i}",
                {"broker": broker, "pool": "threads", "concurrency": 4},
                repeat=i + 1,
                sweep_id=sweep_id,
                metrics={"consume_rate": rate, "tasks_lost": 0},
            )
    return path


def test_two_lab_machines_meet_in_one_database(tmp_path):
    lab(tmp_path / "lab1.duckdb", "lab1-night", "redis", [100, 101, 99, 100, 102])
    lab(tmp_path / "lab2.duckdb", "lab2-night", "rabbitmq", [200, 201, 199, 200, 202])
    for name in ("lab1", "lab2"):
        assert (
            cmx(
                "export",
                "nightly",
                "--out",
                str(tmp_path / f"{name}-ex"),
                "--db",
                str(tmp_path / f"{name}.duckdb"),
                timeout=120,
            ).returncode
            == 0
        )
        proc = cmx("import", str(tmp_path / f"{name}-ex"), "--db", str(tmp_path / "all.duckdb"), timeout=120)
        assert proc.returncode == 0 and f"({name}-night)" in proc.stdout, proc.stderr
    status = cmx("status", "--db", str(tmp_path / "all.duckdb"), timeout=120)
    assert status.returncode == 0 and "nightly" in status.stdout
    row = next(line for line in status.stdout.splitlines() if "nightly" in line)
    assert [c.strip() for c in row.split("│")][3:5] == ["10", "10"], row  # runs, ok: both machines'
    proc = cmx(
        "compare",
        "nightly:broker=redis",
        "nightly:broker=rabbitmq",
        "--db",
        str(tmp_path / "all.duckdb"),
        "--metric",
        "consume_rate",
        "--format",
        "json",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    [m] = json.loads(proc.stdout)
    assert (m["baseline"]["n"], m["contender"]["n"], m["verdict"]) == (5, 5, "better"), m


def test_another_definition_under_the_same_revision_is_refused(tmp_path):
    """Two machines that ran different definitions of one experiment both call theirs revision 1."""
    lab(tmp_path / "lab1.duckdb", "lab1-night", "redis", [100, 101, 99])
    lab(tmp_path / "lab2.duckdb", "lab2-night", "redis", [200, 201, 199])
    for name, digest in (("lab1", "a" * 64), ("lab2", "b" * 64)):
        with db.connect(tmp_path / f"{name}.duckdb") as con:
            con.execute("UPDATE sweeps SET definition_hash = ?, revision = 1", [digest])
        travel.export(tmp_path / f"{name}.duckdb", "nightly", tmp_path / f"{name}-ex", "test")
    target = tmp_path / "all.duckdb"
    travel.import_export(tmp_path / "lab1-ex", target)
    before = rows_of(target)
    line = one_line_exit_2(cmx("import", str(tmp_path / "lab2-ex"), "--db", str(target), timeout=120))
    assert "sweep lab2-night is revision 1 of 'nightly' under another definition (bbbbbbbbbbbb)" in line
    assert "nothing imported" in line and rows_of(target) == before


def test_run_ids_that_clash_are_refused(tmp_path):
    lab(tmp_path / "lab1.duckdb", "night", "redis", [100, 101])
    with db.connect(tmp_path / "lab2.duckdb") as con:
        add_run(con, "nightly", "night-0", {"broker": "redis"}, sweep_id="other-night")
    travel.export(tmp_path / "lab2.duckdb", "nightly", tmp_path / "ex", "test")
    before = rows_of(tmp_path / "lab1.duckdb")
    line = one_line_exit_2(cmx("import", str(tmp_path / "ex"), "--db", str(tmp_path / "lab1.duckdb"), timeout=120))
    assert "run night-0 of a new sweep is already here under another sweep" in line
    assert rows_of(tmp_path / "lab1.duckdb") == before


def test_a_newer_export_is_refused_and_the_database_untouched(source, tmp_path):
    travel.export(source, "exp", tmp_path / "ex", "test")
    manifest = tmp_path / "ex" / "manifest.json"
    body = json.loads(manifest.read_text())
    body["versions"]["tasks"] = 99
    manifest.write_text(json.dumps(body))
    target = tmp_path / "b.duckdb"
    lab(target, "other", "redis", [1])
    before = target.read_bytes()
    line = one_line_exit_2(cmx("import", str(tmp_path / "ex"), "--db", str(target), timeout=120))
    assert "newer cmx" in line and "table tasks at version 99" in line and str(manifest) in line
    assert target.read_bytes() == before
    new = tmp_path / "new.duckdb"
    one_line_exit_2(cmx("import", str(tmp_path / "ex"), "--db", str(new), timeout=120))
    assert not new.exists()


def test_an_older_export_is_imported_with_the_columns_added_since_empty(source, tmp_path):
    """sweeps at version 1 (before provenance): rows go in by column name, the new columns NULL."""
    travel.export(source, "exp", tmp_path / "ex", "test")
    sweeps = tmp_path / "ex" / "sweeps.parquet"
    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT sweep_id, experiment, source, workload, description, inventory, started_at, "
        f"definition FROM read_parquet('{sweeps}')) TO '{sweeps}.v1' (FORMAT parquet)"
    )
    shutil.move(f"{sweeps}.v1", sweeps)
    body = json.loads((tmp_path / "ex" / "manifest.json").read_text())
    body["versions"]["sweeps"] = 1
    (tmp_path / "ex" / "manifest.json").write_text(json.dumps(body))
    travel.import_export(tmp_path / "ex", tmp_path / "b.duckdb")
    got = (
        duckdb.connect(str(tmp_path / "b.duckdb"), read_only=True)
        .execute("SELECT sweep_id, workload, git_commit, revision FROM sweeps")
        .fetchall()
    )
    assert got == [("s1", "throughput", None, None)]


def test_an_import_that_fails_midway_adds_nothing(source, tmp_path):
    travel.export(source, "exp", tmp_path / "ex", "test")
    tasks = tmp_path / "ex" / "tasks.parquet"
    duckdb.connect().execute(
        f"COPY (SELECT run_id, 'x' AS no_such_column FROM read_parquet('{tasks}')) TO '{tasks}.bad' (FORMAT parquet)"
    )
    shutil.move(f"{tasks}.bad", tasks)  # same rows, a column no table has: tasks sorts after the others
    target = tmp_path / "b.duckdb"
    line = one_line_exit_2(cmx("import", str(tmp_path / "ex"), "--db", str(target), timeout=120))
    assert "tasks.parquet" in line and "nothing imported" in line
    assert all(not rows for rows in rows_of(target).values())


@pytest.mark.parametrize(
    "manifest, words",
    [
        (None, "no such folder"),
        ("", "not a cmx export (no manifest.json)"),
        ("{oops", "cannot read it as a cmx export manifest"),
        ('{"a": 1}', "not a cmx export manifest"),
        (
            '{"format": "cmx-export", "format_version": 1, "experiment": "e", "sweeps": [], "versions": {"runs": 2},'
            ' "tables": {"runs": {"rows": 0}}}',
            "table runs is not one that travels",
        ),
        (
            '{"format": "cmx-export", "format_version": 1, "experiment": "e", "sweeps": [], "versions": {"tasks": 1},'
            ' "tables": {"tasks": {"rows": 0}}}',
            "sweeps and run_starts are both needed",
        ),
        ('{"format": "cmx-export", "format_version": 2}', "export format 2 is newer than this cmx reads"),
    ],
)
def test_bad_folders_are_one_line_exit_2(tmp_path, manifest, words):
    folder = tmp_path / "ex"
    if manifest is not None:
        folder.mkdir()
        if manifest:
            (folder / "manifest.json").write_text(manifest)
    line = one_line_exit_2(cmx("import", str(folder), "--db", str(tmp_path / "b.duckdb"), timeout=120))
    assert words in line and str(folder) in line, line
    assert not (tmp_path / "b.duckdb").exists()


def test_a_missing_table_file_is_named(source, tmp_path):
    travel.export(source, "exp", tmp_path / "ex", "test")
    (tmp_path / "ex" / "samples.parquet").unlink()
    line = one_line_exit_2(cmx("import", str(tmp_path / "ex"), "--db", str(tmp_path / "b.duckdb"), timeout=120))
    assert "samples.parquet missing" in line


def test_export_bad_input(source, tmp_path):
    line = one_line_exit_2(cmx("export", "nope", "--out", str(tmp_path / "ex"), "--db", str(source), timeout=120))
    assert "no sweep of experiment 'nope'" in line and "experiments: exp" in line
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    line = one_line_exit_2(cmx("export", "exp", "--out", str(tmp_path / "full"), "--db", str(source), timeout=120))
    assert "not an empty folder" in line
    assert not (tmp_path / "ex").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

"""`cmx run --tag/--note`: stored with the sweep (old databases gain the columns), selectable by tag."""

from __future__ import annotations

import duckdb
import pytest

from cmx.engine.results import db, migrate
from cmx.engine.errors import InputError


def test_parse_tags():
    assert db.parse_tags(["commit=abc123", "env=lab-2", "empty="]) == {"commit": "abc123", "env": "lab-2", "empty": ""}
    for bad in ("novalue", "=x", "sp ace=1", "a'b=1"):
        with pytest.raises(InputError):
            db.parse_tags([bad])


def _start(con, sweep_id, run_id):
    db.record_run_start(
        con,
        experiment="e",
        sweep_id=sweep_id,
        run_id=run_id,
        cell_id="c",
        repeat=1,
        workload="throughput",
        dims={"pool": "threads"},
        params={},
        warmup_s=0.0,
    )


def test_an_old_database_gains_the_columns_and_runs_are_selected_by_tag(tmp_path):
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as con:  # a results database from before tags existed
        con.execute("CREATE TABLE cmx_schema (table_name VARCHAR PRIMARY KEY, version INTEGER NOT NULL)")
        con.execute("INSERT INTO cmx_schema VALUES ('sweeps', 1)")
        con.execute("""CREATE TABLE sweeps (sweep_id VARCHAR, experiment VARCHAR, source VARCHAR, workload VARCHAR,
                       description VARCHAR, inventory VARCHAR, started_at TIMESTAMPTZ, definition JSON)""")
        con.execute("INSERT INTO sweeps VALUES ('s0', 'e', 'e.yaml', 'throughput', '', 'inv', now(), '{}')")
    with db.connect(path) as con:
        db.record_sweep(
            con,
            "s1",
            "e",
            "e.yaml",
            "throughput",
            "",
            "inv",
            {},
            tags={"commit": "abc", "env": "lab"},
            note="after the upgrade",
        )
        db.record_sweep(con, "s2", "e", "e.yaml", "throughput", "", "inv", {}, tags={"commit": "def"})
        _start(con, "s0", "r0")
        _start(con, "s1", "r1")
        _start(con, "s2", "r2")
        assert con.execute("SELECT sweep_id, tags ->> 'commit', note FROM sweeps ORDER BY 1").fetchall() == [
            ("s0", None, None),
            ("s1", "abc", "after the upgrade"),
            ("s2", "def", None),
        ]
        assert con.execute("SELECT version FROM cmx_schema WHERE table_name = 'sweeps'").fetchone() == (
            migrate.current()["sweeps"],
        )

        def runs(tags):
            where, params = db.tagged_runs_sql(con, tags)
            return [r for (r,) in con.execute(f"SELECT run_id FROM runs WHERE {where} ORDER BY 1", params).fetchall()]

        assert runs({}) == ["r0", "r1", "r2"]
        assert runs({"commit": "abc"}) == ["r1"]
        assert runs({"commit": "abc", "env": "lab"}) == ["r1"]
        assert runs({"commit": "abc", "env": "prod"}) == []
        assert runs({"env": "lab"}) == ["r1"]


def test_a_read_only_old_database_has_no_tagged_runs(tmp_path):
    path = tmp_path / "old.duckdb"
    with db.connect(path) as con:
        _start(con, "s0", "r0")
        con.execute("ALTER TABLE sweeps DROP COLUMN tags")
    with db.connect(path, read_only=True) as con:
        assert db.tagged_runs_sql(con, {"a": "b"}) == ("FALSE", [])
        assert db.tagged_runs_sql(con, {}) == ("TRUE", [])


def test_compare_selects_sides_by_tag(tmp_path):
    from cmx.analysis.compare import compare, parse_selection

    with db.connect(tmp_path / "c.duckdb") as con:
        for sweep, commit, rate in (("s1", "old", 100.0), ("s2", "new", 150.0)):
            db.record_sweep(con, sweep, "e", "e.yaml", "throughput", "", "inv", {}, tags={"commit": commit})
            for i in range(2):
                run_id = f"{sweep}-r{i}"
                _start(con, sweep, run_id)
                db.record_run_end(con, run_id, "ok", None, {})
                con.execute("INSERT INTO metrics VALUES (?, 'consume_rate', ?, 'tasks/s')", [run_id, rate + i])
        res = compare(con, parse_selection("e:tag.commit=old"), parse_selection("e:tag.commit=new,pool=threads"))
    rate = {m.metric: m.result for m in res.metrics}["consume_rate"]
    assert (rate.baseline.median, rate.contender.median, rate.baseline.n, rate.contender.n) == (100.5, 150.5, 2, 2)


def _tagged_sweeps(path):
    """One cell of experiment e, three sweeps of three runs each, told apart only by their tags and
    their consume rates: commit=old env=lab ~100/s, commit=new env=lab ~150/s, commit=new env=prod ~300/s."""
    with db.connect(path) as con:
        for sweep, tags, rate in (
            ("s1", {"commit": "old", "env": "lab"}, 100.0),
            ("s2", {"commit": "new", "env": "lab"}, 150.0),
            ("s3", {"commit": "new", "env": "prod"}, 300.0),
        ):
            db.record_sweep(con, sweep, "e", "e.yaml", "throughput", "", "inv", {}, tags=tags)
            for i in range(3):
                run_id = f"{sweep}-r{i}"
                db.record_run_start(
                    con,
                    experiment="e",
                    sweep_id=sweep,
                    run_id=run_id,
                    cell_id="c",
                    repeat=i + 1,
                    workload="throughput",
                    dims={"pool": "threads"},
                    params={"mode": "stream"},
                    warmup_s=0.0,
                )
                db.record_run_end(con, run_id, "ok", None, {})
                con.execute("INSERT INTO metrics VALUES (?, 'consume_rate', ?, 'tasks/s')", [run_id, rate + i])
    return path


def test_cmx_compare_tag_selects_the_runs_of_tagged_sweeps_on_both_sides(tmp_path):
    import json

    from tests.conftest import cmx

    path = _tagged_sweeps(tmp_path / "t.duckdb")

    def contender(*tags):
        proc = cmx("compare", "e:tag.commit=old", "e:tag.commit=new", "--db", str(path), "--format", "json", *tags)
        assert proc.returncode == 0, proc.stderr
        return {m["metric"]: m for m in json.loads(proc.stdout)}["consume_rate"]["contender"]

    everything = contender()  # commit=new: the lab and the prod sweep pooled
    assert (everything["n"], everything["median"]) == (6, 226.0)
    lab = contender("--tag", "env=lab")
    assert (lab["n"], lab["median"]) == (3, 151.0)
    # AND: with commit=new on both sides, the baseline (commit=old) has no run left.
    bad = cmx("compare", "e:tag.commit=old", "e", "--db", str(path), "--tag", "env=lab", "--tag", "commit=new")
    assert bad.returncode == 2 and "baseline" in bad.stderr and "no ok runs match" in bad.stderr, bad.stderr
    table = cmx("compare", "e:tag.commit=old", "e:tag.commit=new", "--db", str(path), "--tag", "env=lab")
    assert "tag.env=lab" in table.stdout  # the title says what was selected
    malformed = cmx("compare", "e", "e", "--db", str(path), "--tag", "nokey")
    assert malformed.returncode == 2 and "--tag 'nokey'" in malformed.stderr and "Traceback" not in malformed.stderr


def test_cmx_report_tag_reports_only_the_runs_of_tagged_sweeps(tmp_path):
    from tests.conftest import cmx

    path = _tagged_sweeps(tmp_path / "t.duckdb")

    def report(out, *tags):
        proc = cmx("report", "e", "--db", str(path), "--out", str(tmp_path / out), *tags)
        return proc, (tmp_path / out / "index.html").read_text() if proc.returncode == 0 else ""

    proc, page = report("all")
    assert proc.returncode == 0 and "1 cells, 9 runs" in proc.stdout, proc.stdout + proc.stderr
    assert "151/s" in page and "Only the runs of sweeps tagged" not in page  # median of all nine: 151
    proc, page = report("prod", "--tag", "env=prod")
    assert proc.returncode == 0 and "1 cells, 3 runs" in proc.stdout, proc.stdout + proc.stderr
    assert "301/s" in page and "151/s" not in page and "Only the runs of sweeps tagged env=prod" in page
    proc, page = report("lab-new", "--tag", "env=lab", "--tag", "commit=new")  # AND: the s2 sweep only
    assert proc.returncode == 0 and "1 cells, 3 runs" in proc.stdout, proc.stdout + proc.stderr
    assert "151/s" in page and "301/s" not in page
    proc, _ = report("none", "--tag", "env=prod", "--tag", "commit=old")
    assert proc.returncode == 2 and "no runs of sweeps tagged env=prod commit=old" in proc.stderr, proc.stderr
    # The narrowing is the report connection's own: the database still has every run.
    csv = cmx("sql", "SELECT count(*) FROM runs", "--db", str(path), "--format", "csv").stdout
    assert csv.split() == ["count_star()", "9"]

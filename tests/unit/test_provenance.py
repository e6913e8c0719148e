"""Provenance: definition and inventory hashes, revisions, and databases from before them."""

import textwrap
from pathlib import Path

import duckdb
import pytest

from cmx.analysis import views
from cmx.engine.results import db
from cmx.engine.errors import InputError
from cmx.engine.model.load import load_experiment
from cmx.engine.hosts.inventory import Inventory
from cmx.engine.model.cells import expand
from cmx.engine.run.provenance import cmx_version, definition_hash, git_state, inventory_hash, revision_for


def digest(tmp_path, body: str, name: str = "exp.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    exp = load_experiment(path)
    return definition_hash(exp, expand(exp))


BASE = """
    name: a
    workload: {name: throughput, params: {tasks: 100}}
    fixed: {heartbeat: 0, backend: none}
    matrix:
      pool: [solo, threads]
      concurrency: [1, 4]
    limits: {run_timeout: 60s}
"""


def test_the_same_definition_written_differently_has_the_same_hash(tmp_path):
    same = """
        # the same experiment: other key order, comments, layout, spellings of the same values
        description: moved and reworded
        limits:
          run_timeout: 1m
        matrix:
          concurrency: [4, 1]   # order of values does not matter
          pool:
            - threads
            - solo
        fixed:
          backend: none
          heartbeat: 0.0
        workload:
          params: {tasks: 100}
          name: throughput
        name: a
        repeats: 5               # more repeats of the same cells
        on_error: abort
    """
    assert digest(tmp_path, BASE, "a.yaml") == digest(tmp_path, same, "b.yaml")
    # The same cells reached another way (fixed vs a one-value matrix) are the same definition.
    moved = BASE.replace("fixed: {heartbeat: 0, backend: none}", "fixed: {backend: none}").replace(
        "concurrency: [1, 4]", "concurrency: [1, 4]\n      heartbeat: [0]"
    )
    assert digest(tmp_path, BASE, "a.yaml") == digest(tmp_path, moved, "c.yaml")


@pytest.mark.parametrize(
    "old, new",
    [
        ("tasks: 100", "tasks: 101"),  # a workload param
        ("concurrency: [1, 4]", "concurrency: [1, 8]"),  # a dimension value
        ("run_timeout: 60s", "run_timeout: 90s"),  # a limit
        ("run_timeout: 60s", "run_timeout: 60s, warmup: 1s"),
        ("heartbeat: 0,", "heartbeat: 10,"),
        ("run_timeout: 60s", "run_timeout: 60s, settle: 3s"),  # a limit added later, set
    ],
)
def test_a_changed_value_changes_the_hash(tmp_path, old, new):
    assert old in BASE
    assert digest(tmp_path, BASE, "a.yaml") != digest(tmp_path, BASE.replace(old, new), "b.yaml")


def test_limits_added_later_keep_the_hash_an_older_cmx_gave_at_their_default(tmp_path):
    """settle and fault_restart came with the fault dimension: at their defaults a definition hashes
    as 0.2.0 hashed it (no such keys), so an upgrade starts no new revision."""
    import hashlib
    import json

    exp = load_experiment((tmp_path / "a.yaml").write_text(textwrap.dedent(BASE).lstrip("\n")) and tmp_path / "a.yaml")
    # (max_runs and max_time, a race's budget, came later still and never enter the hash)
    limits = {
        k: v
        for k, v in exp.limits.model_dump(mode="json").items()
        if k not in ("settle", "fault_restart", "max_runs", "max_time")
    }
    old = json.dumps(
        {"workload": "throughput", "cells": sorted(c.cell_id for c in expand(exp)), "limits": limits},
        sort_keys=True,
        separators=(",", ":"),
    )
    assert definition_hash(exp, expand(exp)) == hashlib.sha256(old.encode()).hexdigest()
    assert digest(
        tmp_path, BASE.replace("run_timeout: 60s", "run_timeout: 60s, settle: 10s"), "b.yaml"
    ) == definition_hash(exp, expand(exp))  # the default, written out: the same definition


def inventory(**vars_) -> Inventory:
    return Inventory(
        path=Path("inv.yml"),
        groups={"brokers": ("b",), "workers": ("w",), "drivers": ("w",)},
        hostvars={"b": vars_, "w": {"ansible_host": "10.0.0.2"}},
    )


def test_the_inventory_hash_leaves_secrets_out():
    a = inventory(broker_url="redis://:s3cret@10.0.0.1:6379/0", redis_password="pw1")
    b = inventory(broker_url="redis://:other@10.0.0.1:6379/0", redis_password="pw2")
    c = inventory(broker_url="redis://:s3cret@10.0.0.9:6379/0", redis_password="pw1")
    assert inventory_hash(a) == inventory_hash(b)  # only secrets differ
    assert inventory_hash(a) != inventory_hash(c)  # the broker moved
    assert len(inventory_hash(a)) == 64


def test_version_and_git_state():
    assert cmx_version() not in ("", "unknown")
    commit, dirty = git_state()
    assert commit is None or (len(commit) == 40 and isinstance(dirty, bool))
    assert git_state(Path("/")) == (None, None)  # not a checkout


def record(con, sweep: str, name: str, digest: str | None, revision: int | None, definition: dict | None = None):
    prov = None if digest is None else {"definition_hash": digest, "revision": revision}
    db.record_sweep(con, sweep, name, "e.yaml", "throughput", "", "inv", definition or {}, prov)


def test_revisions_keep_changed_definitions_apart(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text("name: e\nworkload: {name: throughput}\n")
    exp = load_experiment(path)
    with db.connect(tmp_path / "r.duckdb") as con:
        assert revision_for(con, exp, "h1", "r.duckdb", new_revision=False) == 1  # nothing stored yet
        record(con, "s0", "e", "h0", 1)
        # A sweep that stored no run (provisioning failed, say) holds nothing to keep apart.
        assert revision_for(con, exp, "h1", "r.duckdb", new_revision=False) == 1
        record(con, "s1", "e", "h1", 1)
        db.record_run_start(
            con,
            experiment="e",
            sweep_id="s1",
            run_id="r1",
            cell_id="cr1",
            repeat=1,
            workload="throughput",
            dims={"pool": "solo"},
            params={},
            warmup_s=0,
        )
        db.record_run_end(con, "r1", "ok", None, {})
        assert revision_for(con, exp, "h1", "r.duckdb", new_revision=False) == 1
        with pytest.raises(InputError) as info:
            revision_for(con, exp, "h2", "r.duckdb", new_revision=False)
        assert str(info.value) == (
            f"{path}: experiment 'e' has runs in r.duckdb under another definition "
            "(revision 1): pass --new-revision to start revision 2 beside them, or give the "
            "experiment another name, or pass another --db"
        )
        assert revision_for(con, exp, "h2", "r.duckdb", new_revision=True) == 2
        record(con, "s2", "e", "h2", 2)
        db.record_run_start(
            con,
            experiment="e",
            sweep_id="s2",
            run_id="r2",
            cell_id="cr2",
            repeat=1,
            workload="throughput",
            dims={"pool": "solo"},
            params={},
            warmup_s=0,
        )
        db.record_run_end(con, "r2", "ok", None, {})
        assert revision_for(con, exp, "h2", "r.duckdb", new_revision=False) == 2
        # Going back to revision 1's definition is a change from the latest revision too.
        with pytest.raises(InputError):
            revision_for(con, exp, "h1", "r.duckdb", new_revision=False)
        # Finished sweeps are not resumed (the next cmx run measures again); an unfinished one is,
        # within its own revision only.
        assert db.resume_point(con, "e", 1) == db.resume_point(con, "e", 2) == (None, set())
        db.record_run_start(
            con,
            experiment="e",
            sweep_id="s2",
            run_id="r3",
            cell_id="cr3",
            repeat=1,
            workload="throughput",
            dims={"pool": "solo"},
            params={},
            warmup_s=0,
        )
        assert db.resume_point(con, "e", 2) == ("s2", {("cr2", 1)})
        assert db.resume_point(con, "e", 1) == (None, set())
        cols = [
            r[0]
            for r in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs' ORDER BY column_index"
            ).fetchall()
        ]
        assert cols == [*db.RUN_COLUMNS, "pool"]  # revision after the fixed columns, before the dimensions


def test_a_sweep_stored_before_hashes_is_compared_through_its_definition(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text("name: e\nworkload: {name: throughput}\nmatrix: {pool: [solo]}\n")
    exp = load_experiment(path)
    here = definition_hash(exp, expand(exp))
    with db.connect(tmp_path / "r.duckdb") as con:
        record(con, "s0", "e", None, None, exp.model_dump(mode="json", by_alias=True))
        db.record_run_start(
            con,
            experiment="e",
            sweep_id="s0",
            run_id="r0",
            cell_id="c",
            repeat=1,
            workload="throughput",
            dims={"pool": "solo"},
            params={},
            warmup_s=0,
        )
        assert revision_for(con, exp, here, "r.duckdb", new_revision=False) == 1
        with pytest.raises(InputError):
            revision_for(con, exp, "another", "r.duckdb", new_revision=False)


def test_a_database_from_before_revisions_opens_read_only(tmp_path):
    path = tmp_path / "old.duckdb"
    schema_v1 = db.sql("schema.sql").split("-- Provenance")[0]
    con = duckdb.connect(str(path))
    con.execute(schema_v1)
    con.execute("INSERT INTO sweeps VALUES ('s', 'e', 'e.yaml', 'throughput', '', 'inv', now(), '{}')")
    con.execute("""INSERT INTO run_starts VALUES ('e', 's', 'r', 'c', 1, 'throughput', '{"pool": "solo"}', '{}', 0,
                   now())""")
    con.execute("""CREATE VIEW runs AS SELECT s.experiment, s.run_id, s.cell_id, s.repeat,
                   coalesce(e.status, 'failed') AS status, e.error, s.started_at, e.finished_at, s.workload,
                   TRY_CAST(s.dims ->> 'pool' AS VARCHAR) AS pool
                   FROM run_starts s LEFT JOIN run_ends e USING (run_id)""")
    con.close()
    with views.connect(path, read_only=True) as con:
        assert con.execute("SELECT run_id, revision, pool FROM runs").fetchall() == [("r", 1, "solo")]
        assert con.execute("SELECT DISTINCT revision FROM cell_summary").fetchall() == [(1,)]


def test_a_race_and_its_budget_keep_the_definition(tmp_path):
    """Racing repeats and a budget say how many runs, not what a run is (issue 38): the same revision."""
    same = digest(tmp_path, BASE, "a.yaml")
    raced = (
        BASE.replace("run_timeout: 60s", "run_timeout: 60s, max_runs: 40, max_time: 1h")
        + "    repeats: {min: 3, max: 10}\n"
    )
    assert digest(tmp_path, raced, "b.yaml") == same

"""cmx as a package (issue 25): its own files are found where an install and a checkout both keep
them, its version is the one pyproject.toml and CHANGELOG.md name, an install claims no git
commit, and `cmx report` of an experiment only smoke-run reports the smoke runs.
(tests/integration/test_installed_wheel.py builds, installs and runs the wheel itself.)"""

from __future__ import annotations

import re
import tomllib

import duckdb

from cmx.engine import paths
from cmx.cli.resultsdb import results_db
from cmx.engine.results import db
from cmx.engine.results.db import SMOKE_DB
from cmx.engine.run import provenance
from tests.conftest import REPO, cmx
from tests.results_fixture import add_run

VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_cmx_finds_its_own_files_beside_its_engine():
    assert paths.ROOT == REPO  # from a checkout; an install mirrors these folders under cmx/
    assert {p.name for p in paths.ROLES.iterdir()} >= {"python_env", "redis", "rabbitmq", "postgres"}
    assert all((paths.ROLES / r / "tasks" / "main.yml").is_file() for r in ("python_env", "redis"))
    assert (paths.PLAYBOOKS / "provision.yml").is_file() and paths.HOST_REQUIREMENTS.is_file()
    assert (paths.WORKLOADS / "app" / "worker.py").is_file() and paths.BUILTIN_INVENTORY.is_file()
    assert (paths.EXPERIMENTS / "quickstart.yaml").is_file() and paths.SCHEMA.is_file()


def test_shipped_experiments_name_inventories_that_exist_from_their_own_folder():
    """Each resolves the same way in a checkout and an install (both keep inventory/ beside experiments/)."""
    from cmx.engine.model.yamlpos import load_yaml

    named = {}
    for exp in sorted(paths.EXPERIMENTS.rglob("*.yaml")):
        inventory = load_yaml(exp)[0].get("inventory")
        if inventory:
            named[exp.name] = (exp.parent / inventory).resolve()
    assert named, "no shipped experiment names an inventory (then this test proves nothing)"
    assert all(p.is_file() and p.parent == paths.BUILTIN_INVENTORY.parent for p in named.values()), named


def test_version_is_semantic_and_the_changelog_starts_with_it():
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION)
    assert provenance.cmx_version() == VERSION
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert "keepachangelog.com" in changelog and "semver.org" in changelog
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)
    assert released and released[0] == VERSION, released
    proc = cmx("--version", timeout=120)
    assert proc.returncode == 0 and proc.stdout.split()[:2] == ["cmx", VERSION], proc.stdout


def test_an_install_claims_no_git_commit(monkeypatch):
    """An install may sit inside someone else's repository: git there is not cmx's commit."""
    assert provenance.git_state()[0]  # this checkout has one
    monkeypatch.setattr(provenance, "is_checkout", lambda: False)
    assert provenance.git_state() == (None, None)


def _db_with(path, experiment: str) -> None:
    with db.connect(path) as con:
        add_run(con, experiment, f"{experiment}-r1", {"pool": "threads"})


def test_without_db_an_experiment_only_smoke_run_is_read_from_the_smoke_db(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert results_db(db.DEFAULT_DB, "demo") == db.DEFAULT_DB  # nothing anywhere
    assert results_db(db.DEFAULT_DB) == db.DEFAULT_DB
    _db_with(SMOKE_DB, "demo")
    assert results_db(db.DEFAULT_DB, "demo") == SMOKE_DB
    assert results_db(db.DEFAULT_DB) == SMOKE_DB  # status: no run in the default one
    assert results_db(db.DEFAULT_DB, "demo", "demo") == SMOKE_DB  # compare: both sides
    assert results_db(db.DEFAULT_DB, "demo", "other") == db.DEFAULT_DB
    assert results_db(db.DEFAULT_DB, "other") == db.DEFAULT_DB
    assert results_db(tmp_path / "given.duckdb", "demo") == tmp_path / "given.duckdb"
    _db_with(db.DEFAULT_DB, "demo")  # real runs: those are read
    assert results_db(db.DEFAULT_DB, "demo") == db.DEFAULT_DB
    assert results_db(db.DEFAULT_DB) == db.DEFAULT_DB
    with duckdb.connect(str(SMOKE_DB), read_only=True) as con:  # left as it was
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)


def test_every_results_command_finds_the_smoke_runs_after_the_install_flow(tmp_path):
    """README's install flow: `cmx run … --smoke` writes only results/smoke.duckdb; then status,
    trend, compare and recommend read it as report does, saying so on stderr (issue 43)."""
    with db.connect(tmp_path / SMOKE_DB) as con:
        db.record_sweep(
            con, "s1", "demo", "experiments/demo.yaml", "throughput", "", "inv", {}, {"revision": 1}, planned=3
        )
        for r in (1, 2, 3):
            add_run(con, "demo", f"demo-r{r}", {"pool": "threads"}, repeat=r, metrics={"consume_rate": 100.0 + r})
    for args in (["status"], ["trend", "demo"], ["compare", "demo", "demo"], ["recommend", "demo"]):
        proc = cmx(*args, cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "no results database here yet" not in proc.stderr, (args, proc.stderr)
        assert f"smoke runs, in {SMOKE_DB}" in proc.stderr, (args, proc.stderr)
    assert "demo" in cmx("status", cwd=tmp_path, timeout=120).stdout


def test_the_cli_starts_without_celery_or_the_workload_catalog():
    """Every command imports cmx.cli.main (all commands' modules): a reading command (report,
    recommend, ...) must not pay for Celery and the experiment model at start (about 1 CPU-s on
    the benchmark machine; cli/resultsdb.py once took SMOKE_DB from engine/plan/smoke.py)."""
    import subprocess
    import sys

    heavy = ("celery", "cmx.workloads.catalog.registry", "cmx.engine.plan.smoke", "cmx.engine.model.dimensions")
    code = f"import sys, cmx.cli.main; print([m for m in {heavy!r} if m in sys.modules])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"

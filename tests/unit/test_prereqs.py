"""`make test` skips nothing silently: a missing prerequisite fails the test unless CMX_ALLOW_SKIP=1."""

import subprocess

import pytest

from tests.conftest import REPO
from tests.prereqs import require


def test_missing_prerequisite_fails(monkeypatch):
    monkeypatch.delenv("CMX_ALLOW_SKIP", raising=False)
    with pytest.raises(pytest.fail.Exception, match="needs sshd: run .ci/test-deps"):
        require("needs sshd")


def test_opt_out_skips(monkeypatch):
    monkeypatch.setenv("CMX_ALLOW_SKIP", "1")
    with pytest.raises(pytest.skip.Exception, match=r"needs sshd \(CMX_ALLOW_SKIP=1\)"):
        require("needs sshd")


def test_nothing_missing_passes(monkeypatch):
    monkeypatch.delenv("CMX_ALLOW_SKIP", raising=False)
    require(None)


def test_make_test_installs_or_names_what_is_missing():
    dry = subprocess.run(["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and ".ci/test-deps" in dry.stdout.split("pytest")[0]
    assert "make test" in (REPO / ".ci" / "run").read_text()


#: The one place a test may skip: require() (and its own tests).
_MAY_SKIP = {"tests/prereqs.py", "tests/unit/test_prereqs.py"}
_SKIPS = ("skipif(", "pytest.skip(", "importorskip(")


def test_no_test_skips_on_its_own():
    """One policy everywhere: a test whose prerequisite is missing goes through require() (fails
    saying what, or skips knowingly with CMX_ALLOW_SKIP=1), never a skip of its own that plain
    `pytest` hides."""
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in sorted((REPO / "tests").rglob("*.py"))
        if path.relative_to(REPO).as_posix() not in _MAY_SKIP
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if any(s in line for s in _SKIPS)
    ]
    assert found == []


def test_make_unit_runs_the_tests_that_need_no_service():
    """`make unit` is tests/unit; a test there that needs Redis, RabbitMQ or PostgreSQL lives in
    tests/integration (marked `integration`) instead."""
    dry = subprocess.run(["make", "-n", "unit"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and "tests/unit" in dry.stdout and "not integration" in dry.stdout
    marked = [
        p.name
        for p in sorted((REPO / "tests" / "unit").glob("test_*.py"))
        if "mark.integration" in p.read_text() and p.name != "test_prereqs.py"
    ]
    assert marked == []

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

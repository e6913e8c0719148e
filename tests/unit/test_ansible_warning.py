"""No Python warning on a command's output (issue 51): Ansible's import printed cryptography's
`CryptographyDeprecationWarning: DSA is deprecated…` on every validate, doctor and run. cmx filters
that one warning where it imports Ansible, and no other (each test starts a Python: 2–5 s)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, cmx

PROBE = """
import warnings
import cmx.engine.hosts.inventory  # where cmx imports Ansible
from ansible.inventory.manager import InventoryManager
import ansible._internal._ssh._ssh_agent
warnings.warn("another deprecation", DeprecationWarning)
"""


def test_validate_prints_no_warning():
    p = cmx("validate", "experiments/quickstart.yaml")
    assert p.returncode == 0, p.stderr
    assert "Warning" not in p.stderr and "DSA" not in p.stderr, p.stderr


def test_only_the_dsa_warning_is_filtered():
    """With every warning shown (-W default), the DSA one is still gone and any other still shows."""
    p = subprocess.run(
        [sys.executable, "-W", "default", "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert "DSA is deprecated" not in p.stderr
    assert "DeprecationWarning: another deprecation" in p.stderr

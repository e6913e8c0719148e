"""Where cmx's own files are: the roles, playbooks, workloads, inventories, experiments and schema.

An install (wheel, sdist, pipx) holds each of them in the ``cmx`` folder beside ``cmx/engine``,
as the checkout holds them beside ``engine/`` (pyproject.toml maps each folder into the package
from where it lives), so one path relative to this file finds them in both, editable or not.
Paths rather than ``importlib.resources``: Ansible reads roles and playbooks from the file
system, and pip installs wheels unzipped. Nothing is ever written under ``ROOT``: an install may
be read-only and shared, a checkout is somebody's working tree; what a sweep makes goes to its
results folder (the ``--db``'s).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The checkout, or ``site-packages/cmx`` of an install.
ROOT = Path(__file__).resolve().parents[1]
ROLES = ROOT / "roles"
PLAYBOOKS = ROOT / "engine" / "hosts" / "playbooks"
HOST_REQUIREMENTS = ROOT / "engine" / "hosts" / "host-requirements.txt"
#: The package shipped to every host (with the user's code beside it).
WORKLOADS = ROOT / "workloads"
#: The built-in inventory: this machine plays every part, services on loopback.
BUILTIN_INVENTORY = ROOT / "inventory" / "local.yml"
EXPERIMENTS = ROOT / "experiments"
SCHEMA = ROOT / "docs" / "cmx.schema.json"
#: The inventory a folder may hold for the experiments run from it (relative to the current folder).
LOCAL_INVENTORY = Path("inventory") / "local.yml"


#: Where each host's work dir is made when the inventory sets no ``cmx_workdir``:
#: ``<root>/<inventory name>``. The environment variable moves the root (a disk with room, or one
#: root per concurrent test process); engine/hosts/playbooks/vars/cmx.yml reads the same variable.
WORKDIR_ROOT_ENV = "CMX_WORKDIR_ROOT"
DEFAULT_WORKDIR_ROOT = "/var/tmp/cmx"


def default_workdir(host: str) -> str:
    """A host's work dir when its inventory sets no ``cmx_workdir``."""
    return f"{os.environ.get(WORKDIR_ROOT_ENV) or DEFAULT_WORKDIR_ROOT}/{host}"


def user_cache(name: str) -> Path:
    """A file or folder of the controller's cache, shared by every results folder of this user:
    ``$XDG_CACHE_HOME/cmx/<name>`` (``~/.cache/cmx/<name>``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cmx" / name


def is_checkout() -> bool:
    """True when cmx runs from a git checkout of itself (editable install), not from an install:
    only then does a git commit say which code ran (an install may sit inside someone else's repository)."""
    return (ROOT / ".git").exists()

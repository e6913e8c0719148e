"""Which inventory a sweep uses (issue 25): --inventory, else the experiment's `inventory:` (found
from the experiment file's folder), else ./inventory/local.yml, else the built-in localhost
inventory, said in one line. A named inventory that is missing, or one without workers, is one
line naming what and where, exit 2, and nothing is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cmx.engine.errors import InputError
from cmx.engine.hosts.connection import connections
from cmx.engine.hosts.inventory import choose_inventory, load_inventory
from cmx.engine.paths import BUILTIN_INVENTORY
from tests.conftest import REPO, cmx, write

EXPERIMENT = "name: e\nworkload: {name: throughput}\n"
NO_WORKERS = """
all:
  vars: {ansible_connection: local}
  children:
    brokers: {hosts: {localhost: {broker_url: "redis://127.0.0.1:6379/0"}}}
    drivers: {hosts: {localhost: {}}}
"""


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_precedence_option_then_file_then_current_folder_then_built_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("given.yml", "lab/x.yml", "inventory/local.yml"):
        write(tmp_path / name, "all: {}\n")
    exp = write(tmp_path / "experiments" / "e.yaml", EXPERIMENT + "inventory: ../lab/x.yml\n")
    assert choose_inventory(Path("given.yml"), "../lab/x.yml", exp) == Path("given.yml")
    assert choose_inventory(None, "../lab/x.yml", "experiments/e.yaml") == Path("lab/x.yml")
    assert choose_inventory(None, str(tmp_path / "given.yml"), "experiments/e.yaml") == tmp_path / "given.yml"
    assert choose_inventory(None, None, "experiments/e.yaml") == Path("inventory/local.yml")
    (tmp_path / "inventory" / "local.yml").unlink()
    assert choose_inventory(None, None, "experiments/e.yaml") == BUILTIN_INVENTORY


def test_the_built_in_inventory_is_localhost_in_every_group_without_ssh(tmp_path):
    inv = load_inventory(BUILTIN_INVENTORY, secrets_dir=tmp_path)
    assert {g: list(h) for g, h in inv.groups.items()} == {
        g: ["localhost"] for g in ("brokers", "backends", "workers", "drivers", "services")
    }
    assert connections(BUILTIN_INVENTORY, ["localhost"])["localhost"].local  # no SSH
    assert inv.broker_url("redis").startswith("redis://127.0.0.1:")


def test_an_inventory_named_in_the_file_is_found_from_its_folder_else_from_the_current_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "inventory" / "lab.yml", "all: {}\n")
    write(tmp_path / "experiments" / "e.yaml", EXPERIMENT + "inventory: ../inventory/lab.yml\n")
    assert choose_inventory(None, "../inventory/lab.yml", "experiments/e.yaml") == Path("inventory/lab.yml")
    # As written before 0.2 (and in DESIGN's example): from the current folder, still found.
    assert choose_inventory(None, "inventory/lab.yml", "experiments/e.yaml") == Path("inventory/lab.yml")
    # The file's folder wins where both have one.
    write(tmp_path / "experiments" / "inventory" / "lab.yml", "all: {}\n")
    assert choose_inventory(None, "inventory/lab.yml", "experiments/e.yaml") == Path("experiments/inventory/lab.yml")
    exp = write(tmp_path / "experiments" / "f.yaml", EXPERIMENT + "inventory: nowhere/lab.yml\n")
    with pytest.raises(InputError) as info:
        choose_inventory(None, "nowhere/lab.yml", "experiments/f.yaml")
    [problem] = info.value.problems
    assert str(problem) == (
        "experiments/f.yaml:3:12: inventory: experiments/nowhere/lab.yml not found (a "
        "relative inventory is found from the experiment file's folder, or else from the "
        "current folder)"
    )
    assert exp.exists()


@pytest.mark.parametrize("case", ["option", "file", "no-workers"])
def test_bad_inventory_is_one_line_exit_2_and_nothing_written(tmp_path, case):
    named = "inventory: ../nope.yml\n" if case == "file" else ""
    exp = write(tmp_path / "experiments" / "e.yaml", EXPERIMENT + named)
    args = ["run", "experiments/e.yaml"]
    if case == "option":
        args += ["--inventory", "nope.yml"]
    if case == "no-workers":
        write(tmp_path / "inventory" / "local.yml", NO_WORKERS)
    before = _files(tmp_path)
    for command in (args, ["validate", *args[1:]]):
        proc = cmx(*command, cwd=tmp_path, timeout=120)
        assert proc.returncode == 2, proc.stderr
        [line] = proc.stderr.strip().splitlines()
        assert {
            "option": line == "nope.yml: inventory not found (named by --inventory)",
            "file": line.startswith("experiments/e.yaml:3:12: inventory: nope.yml not found"),
            "no-workers": line
            == (
                "inventory/local.yml: inventory has no hosts in group(s) workers (every "
                "sweep needs brokers, workers and drivers)"
            ),
        }[case], line
        assert "Traceback" not in proc.stdout + proc.stderr
        assert _files(tmp_path) == before, "a refused command wrote files"
    assert exp.exists()


def test_init_in_an_empty_folder_validates_on_the_built_in_inventory_and_says_so(tmp_path):
    made = cmx("init", "demo", cwd=tmp_path, timeout=120)
    assert made.returncode == 0, made.stderr
    proc = cmx("validate", "experiments/demo.yaml", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line == (
        "experiments/demo.yaml: no inventory named (--inventory, inventory:, ./inventory/local.yml): "
        "using the built-in localhost inventory (this machine plays every part; `cmx doctor` shows its file)"
    )
    assert _files(tmp_path) == {"experiments", "experiments/demo.yaml", "experiments/demo_tasks.py"}
    # naming the built-in file itself is naming an inventory: nothing to say
    named = cmx("validate", "experiments/demo.yaml", "--inventory", str(BUILTIN_INVENTORY), cwd=tmp_path, timeout=120)
    assert named.returncode == 0 and named.stderr == "", named.stderr
    # a folder's own inventory/local.yml wins, silently
    write(tmp_path / "inventory" / "local.yml", (REPO / "inventory" / "local.yml").read_text())
    quiet = cmx("validate", "experiments/demo.yaml", cwd=tmp_path, timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert os.path.relpath(BUILTIN_INVENTORY, REPO) == "inventory/local.yml"  # from a checkout: its own file

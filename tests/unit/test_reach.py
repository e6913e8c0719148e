"""One round trip per host when a sweep starts (engine/hosts/reach.py): who answers, and the
content key each holds (engine/hosts/provision.py's Shipment), read without a playbook."""

from __future__ import annotations

from pathlib import Path

from cmx.engine.hosts.connection import Connection
from cmx.engine.hosts.provision import Shipment
from cmx.engine.hosts.reach import blocked, survey


def _shipment(key: str = "k" * 16) -> Shipment:
    return Shipment(Path("/w/house.tar"), ("celery==5.7.0",), (), {}, Path("/w/workloads-abc123.tar"), key)


def test_a_local_host_answers_with_the_keys_it_holds(tmp_path):
    ship = _shipment()
    held, fresh = (Connection(h, True, str(tmp_path / h)) for h in ("held", "fresh"))
    for f in ship.key_files(held):
        Path(f).parent.mkdir(parents=True)
        Path(f).write_text(ship.key + "\n")
    lost, keys = survey({"held": held, "fresh": fresh}, ship.key_files)
    assert lost == {}
    assert ship.held_by(keys["held"]) and not ship.held_by(keys["fresh"]) and keys["fresh"] == ""


def test_the_key_must_be_in_the_venv_and_in_this_codes_folder():
    ship = _shipment()
    assert ship.held_by(f"{ship.key}\n{ship.key}\n")
    assert not ship.held_by(f"{ship.key}\n")  # the code folder of this version is missing
    assert not ship.held_by(f"{ship.key}\n{'x' * 16}\n")
    assert ship.key_files(Connection("h", False, "/var/tmp/cmx/h")) == [
        "/var/tmp/cmx/h/venv/.cmx-key",
        "/var/tmp/cmx/h/lib/workloads-abc123/.cmx-key",
    ]


def test_a_host_that_does_not_answer_is_named_and_blocks_only_its_runs():
    ghost = Connection("ghost", False, "/w", address="127.0.0.1", port=1, ssh_args=("-o", "ConnectTimeout=2"))
    lost, keys = survey({"ghost": ghost}, _shipment().key_files)
    assert list(lost) == ["ghost"] and lost["ghost"].startswith("ssh 127.0.0.1: ") and keys == {}
    assert blocked({"r1": ["h1"], "r2": ["h1", "ghost"]}, lost) == {
        "r2": f"host ghost was unreachable when the sweep started ({lost['ghost']})"
    }

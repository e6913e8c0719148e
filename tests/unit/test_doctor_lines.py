"""`cmx doctor`'s lines, exit code, bounds and fixes (engine/hosts/doctor.py), without hosts."""

from __future__ import annotations

import time

from cmx.engine.hosts import doctor as dr
from cmx.engine.hosts import localservices
from cmx.engine.hosts.inventory import Inventory


def test_a_line_has_a_mark_what_where_and_the_fix_only_when_not_ok():
    ok = dr.Check("broker", "redis://127.0.0.1:6379/0", dr.OK, "answers", "never shown")
    bad = dr.Check("reach", "far", dr.FAIL, "ssh 10.0.0.9: Connection refused", "make `ssh … true` work")
    warn = dr.Check("clock", "far", dr.WARN, "offset unknown", "let UDP through")
    assert dr.line(ok) == "✓ broker           redis://127.0.0.1:6379/0: answers"
    assert dr.line(bad) == "✗ reach            far: ssh 10.0.0.9: Connection refused — fix: make `ssh … true` work"
    assert dr.line(warn).startswith("! clock ") and dr.line(warn).endswith("— fix: let UDP through")
    assert dr.line(ok, unicode=False).startswith("ok ") and dr.line(bad, unicode=False).startswith("FAIL ")


def test_exit_is_1_when_any_check_failed_and_0_with_warnings_only():
    ok = dr.Check("a", "h", dr.OK, "")
    assert dr.exit_code([ok, dr.Check("b", "h", dr.WARN, "")]) == 0
    assert dr.exit_code([ok, dr.Check("c", "h", dr.FAIL, "")]) == 1
    assert dr.exit_code([]) == 0


def test_checks_run_at_once_in_their_order_and_one_past_its_bound_fails():
    def slow():
        time.sleep(30)
        return []

    def boom():
        raise RuntimeError("no route\nmore")

    tasks = [
        dr.Task("slow", "h1", 1.0, slow),
        dr.Task("fast", "h2", 5.0, lambda: [dr.Check("fast", "h2", dr.OK, "answers")]),
        dr.Task("boom", "h3", 5.0, boom),
    ]
    t0 = time.monotonic()
    checks = dr.run_all(tasks)
    assert time.monotonic() - t0 < 10  # bounded by the slow one's bound, not its 30 s
    assert [(c.what, c.state) for c in checks] == [("slow", dr.FAIL), ("fast", dr.OK), ("boom", dr.FAIL)]
    assert checks[0].detail == "no answer within 1 s" and checks[2].detail == "RuntimeError: no route"


def test_secrets_of_the_inventory_are_scrubbed_from_any_line(tmp_path):
    inv = Inventory(
        path=tmp_path / "inv.yml",
        groups={"brokers": ("b",)},
        hostvars={
            "b": {
                "broker_url": ["amqp://cmx:S3cret%2Fpw@10.0.0.5:5672//", "redis://10.0.0.5:6379/0"],
                "redis_password": "r3dis-pass",
                "database_url": "postgresql://u:dbpw123@db/x",
            }
        },
    )
    secrets = dr.secrets_of(inv)
    assert secrets == {"S3cret%2Fpw", "S3cret/pw", "r3dis-pass", "dbpw123"}
    assert dr.scrub("auth failed for S3cret/pw and r3dis-pass", secrets) == "auth failed for *** and ***"


def test_the_fix_for_a_service_of_this_machine_names_the_commands_that_start_it():
    redis = localservices.for_kind("redis")
    fix = dr._fix("redis://:pw@127.0.0.1:6379/0", "broker_url", "inv.yml")
    assert fix.startswith("start it: `cmx services up` (runs: ") and localservices.command_text(redis) in fix
    assert "redis-server --daemonize yes" in fix
    assert dr._fix("amqp://u:pw@127.0.0.1:1//", "broker_url", "inv.yml") == (
        "nothing answers on port 1: `cmx services up` starts RabbitMQ on 127.0.0.1:5672; point broker_url in "
        "inv.yml there"
    )
    assert (
        dr._fix("postgresql://u@db.lab:5432/x", "database_url", "inv.yml")
        == "is it running, and is database_url in inv.yml right?"
    )


def test_every_server_kind_has_a_way_to_start_it_here():
    from cmx.workloads.servers.registry import SERVERS

    # A Sentinel set is provisioned by each sweep that uses it, on loopback too (roles/redis_sentinel):
    # the machine's own services stay one Redis, one RabbitMQ, one PostgreSQL.
    assert {s.kind for s in localservices.LOCAL if s.kind} == {n for n, s in SERVERS.items() if not s.spread}


#: Eight checks that each import kombu's Connection at once, as the broker checks do, in a fresh
#: interpreter (kombu not yet imported); prints the lines that failed.
_RACE = """
from cmx.engine.hosts import doctor as dr

def check():
    from kombu import Connection  # noqa: F401
    return [dr.Check("broker", "x", dr.OK, "answers")]

print(sum(c.state != dr.OK for c in dr.run_all([dr.Task("broker", "x", 30, check) for _ in range(8)])))
"""


def test_checks_importing_kombu_at_once_do_not_fail_for_it():
    # kombu sets itself up lazily on first import; eight threads doing it at once found half of it
    # ("cannot import name 'Connection' from 'kombu'") in 25 of 30 fresh interpreters here, which
    # failed a broker check of `cmx doctor` in the full suite.
    import subprocess
    import sys

    for _ in range(5):
        proc = subprocess.run([sys.executable, "-c", _RACE], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout.strip() == "0", proc.stdout + proc.stderr

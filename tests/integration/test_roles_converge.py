"""The roles converge: provisioning a host a second time with the engine's own code
(engine/hosts/provision.py through ansible-runner) changes nothing, for every role; a changed setting
is applied by the roles' handlers; stopping leaves nothing running and a second stop changes nothing.

One test host in a network namespace (tests/nethosts.py) gets everything a sweep can provision:
the venv (python_env), Redis, PostgreSQL and RabbitMQ, each a server of its own.
"""

from __future__ import annotations

import yaml
import pytest

from cmx.engine.hosts.ansible import PlaybookResult
from cmx.engine.hosts.inventory import load_inventory
from cmx.engine.hosts.provision import provision, stop_services
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("nethosts_can_be_made")]

SERVICES = {"postgres": ["h1"], "rabbitmq": ["h1"], "redis": ["h1"]}
ROLES = ("python_env", "redis", "postgres", "rabbitmq")


def _converge(inv_path, results) -> dict[str, PlaybookResult]:
    seen: dict[str, PlaybookResult] = {}
    inventory = load_inventory(inv_path, secrets_dir=results)
    provision(inventory, ["h1"], results, SERVICES, on_result=seen.__setitem__)
    assert set(seen) == {"provision.yml", "services.yml"}
    return seen


def _changed(results: dict[str, PlaybookResult]) -> list[str]:
    return [task for r in results.values() for task in r.changed]


def _roles(changed: list[str]) -> set[str]:
    return {task.split(": ")[1] for task in changed}


def _services_answer(inv_path, results) -> None:
    """What a run sees: the engine's URLs for the provisioned services log in and answer."""
    import kombu
    import psycopg2
    import redis

    inventory = load_inventory(inv_path, secrets_dir=results)
    assert redis.Redis.from_url(inventory.broker_url("redis"), socket_timeout=5).ping()
    with psycopg2.connect(inventory.backend_url("postgres"), connect_timeout=5) as con, con.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    with kombu.Connection(inventory.broker_url("rabbitmq"), connect_timeout=5) as con:
        con.connect()
        assert con.connected


def _processes(net) -> list[str]:
    """What runs in the test host's namespace besides its sshd."""
    out = []
    for pid in net.pids(net.hosts[0]):
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            continue
        if not comm.startswith("sshd"):
            out.append(f"{pid} {comm}")
    return out


def test_second_converge_changes_nothing_and_handlers_apply_changes(tmp_path):
    results = tmp_path / "results"
    with NetHosts(tmp_path / "net", 1) as net:
        inv_path = net.inventory(
            tmp_path / "lab.yml",
            {"brokers": ["h1"], "backends": ["h1"], "drivers": ["h1"], "workers": ["h1"]},
            workdir_root=tmp_path / "hosts",
        )
        try:
            first = _converge(inv_path, results)
            # The first converge really does the work, in every role (so the next check can fail).
            assert _roles(_changed(first)) >= set(ROLES), _changed(first)

            second = _converge(inv_path, results)
            assert _changed(second) == [], "not idempotent:\n" + "\n".join(_changed(second))
            for name, result in second.items():  # ansible-runner's own stats agree
                assert result.changed_per_host and all(n == 0 for _, n in result.changed_per_host), (name, result)
            _services_answer(inv_path, results)

            # A changed setting is applied: configs rewritten, servers restarted by the handlers,
            # passwords changed in place; the engine's URLs then work with the new passwords.
            inv = yaml.safe_load(inv_path.read_text())
            inv["all"]["hosts"]["h1"].update(
                {
                    "redis_password": "changed-redis-pw",
                    "postgres_password": "changed-pg-pw'quote",
                    "rabbitmq_password": "changed-rabbit-pw",
                    "postgres_port": 5433,
                    "rabbitmq_stats_interval_s": 2,
                }
            )
            inv_path.write_text(yaml.safe_dump(inv))
            third = _converge(inv_path, results)
            changed = _changed(third)
            for handler in ("redis: Restart Redis", "postgres: Restart PostgreSQL", "rabbitmq: Restart RabbitMQ"):
                assert any(t.endswith(handler) for t in changed), (handler, changed)
            assert any(t.startswith("h1: postgres: Set the password") for t in changed), changed
            assert any(t.startswith("h1: rabbitmq: Ensure the sweep's user exists") for t in changed), changed
            assert any(t.startswith("h1: redis: Ensure Redis is configured") for t in changed), changed
            _services_answer(inv_path, results)
        finally:
            stopped: dict[str, PlaybookResult] = {}
            warning = stop_services(
                load_inventory(inv_path, secrets_dir=results), SERVICES, results, on_result=stopped.__setitem__
            )
        assert warning is None, warning
        assert _roles(list(stopped["services_stop.yml"].changed)) == {"redis", "postgres", "rabbitmq"}
        assert _processes(net) == []
        again: dict[str, PlaybookResult] = {}
        assert (
            stop_services(load_inventory(inv_path, secrets_dir=results), SERVICES, results, on_result=again.__setitem__)
            is None
        )
        assert again["services_stop.yml"].changed == ()

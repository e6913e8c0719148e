"""Two sweeps at once on one host (issue 43 point 5): each its own results database, one inventory,
so one work dir on each host. What they shared before: the Redis a sweep provisions in
``<cmx_workdir>/redis`` (the second sweep's services playbook set its own generated password on
it, and the first sweep's end stopped it under the second's runs) and the venv provisioning
rewrites. Now the second waits for the first, saying so in one line; both end with every run ok."""

from __future__ import annotations

import os
import subprocess
import textwrap
import time

import pytest

from tests.conftest import CMX, REPO, local_inventory, query, write
from tests.nethosts import NetHosts

pytestmark = pytest.mark.integration

BODY = """
    workload: {{name: concurrent_sleep, params: {{tasks: 20, sleep_s: 0.2}}}}
    fixed: {{broker: redis, backend: none, concurrency: 4, pool: threads}}
    repeats: 1
    limits: {{run_timeout: 2m}}
    inventory: {inv}
"""


def _both(tmp_path, inv):
    """Start two sweeps a second apart; (returncode, stderr, run statuses) of each."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CMX_LOCK_DIR": str(tmp_path / "locks")}
    procs = []
    for name in ("first", "second"):
        exp = write(tmp_path / f"{name}.yaml", f"name: two-{name}\n" + textwrap.dedent(BODY).lstrip().format(inv=inv))
        db = tmp_path / name / "cmx.duckdb"
        procs.append(
            (
                db,
                subprocess.Popen(
                    [*CMX, "run", str(exp), "--db", str(db)],
                    cwd=REPO,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
        )
        time.sleep(1.0)
    out = []
    for db, proc in procs:
        stdout, stderr = proc.communicate(timeout=900)
        statuses = [s for (s,) in query(db, "SELECT status FROM runs")] if db.exists() else []
        out.append((proc.returncode, stdout + stderr, statuses))
    return out


def _check(results):
    for rc, text, statuses in results:
        assert rc == 0 and statuses == ["ok"], (rc, statuses, text[-4000:])
    waited = [line for line in results[1][1].splitlines() if "is in use by the sweep of 'two-first'" in line]
    assert len(waited) == 1, results[1][1][-4000:]


def test_two_sweeps_at_once_on_localhost_both_end_ok(tmp_path):
    from tests.faults.brokers import free_port

    inv = local_inventory(
        tmp_path / "local.yml",
        tmp_path / "hosts" / "localhost",
        brokers={"redis_port": free_port(), "redis_bind": "127.0.0.1"},
    )
    _check(_both(tmp_path, inv))


@pytest.mark.usefixtures("nethosts_can_be_made")
def test_two_sweeps_at_once_on_shared_ssh_hosts_both_end_ok(tmp_path):
    with NetHosts(tmp_path / "net", 2) as net:
        inv = net.inventory(
            tmp_path / "lab.yml",
            {"brokers": ["h1"], "drivers": ["h1"], "workers": ["h2"]},
            workdir_root=tmp_path / "hosts",
            seeded=True,
        )
        _check(_both(tmp_path, inv))

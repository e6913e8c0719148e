"""Faults: the broker restarts mid-run (issue #14). The run ends, within a bounded time, failed
(naming the broker it lost) or ok, with published = completed + lost; the sweep's next run is
ok; what was stored before is still there, the database opens, and no process of the run is left.

The broker is one of the test's own (tests/faults/brokers.py): a Redis without persistence, as a
sweep provisions one, and a second RabbitMQ node; the machine's shared servers are not touched.
Real workers, real Ansible (this machine as the only host), real DuckDB.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import query, write
from tests.faults import common
from tests.faults.brokers import PrivateRabbitMQ, PrivateRedis
from tests.hostseed import seed_local

pytestmark = [pytest.mark.integration, pytest.mark.faults]

#: The first run streams 1500 tasks at 100/s (15 s); the broker restarts 3 s into it. The second
#: run is the sweep's next one: it must be ok.
EXPERIMENT = """
    name: {name}
    workload: {{name: throughput, params: {{mode: stream, rate: 100}}}}
    fixed: {{pool: threads, concurrency: 2, broker: {broker}}}
    matrix: {{params.tasks: [1500, 100]}}
    limits: {{run_timeout: 90s}}
    on_error: continue
"""


def _inventory(path: Path, workdir: Path, broker_url: str, api_url: str | None) -> Path:
    seed_local(workdir)  # provisioned already (tests/hostseed.py): the subject is the restart
    api = f"\n                  rabbitmq_api_url: {api_url}" if api_url else ""
    return write(
        path,
        f"""
        all:
          vars:
            ansible_connection: local
            ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"
            python_env_interpreter: "{{{{ ansible_playbook_python }}}}"
          hosts:
            localhost:
              cmx_workdir: {workdir}
          children:
            brokers:
              hosts:
                localhost:
                  broker_url: {broker_url}{api}
            workers: {{hosts: {{localhost: }}}}
            drivers: {{hosts: {{localhost: }}}}
    """,
    )


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> tuple[Path, Path]:
    """One results database and host work dir for both brokers: the host is provisioned once."""
    root = tmp_path_factory.mktemp("restart")
    return root / "results" / "cmx.duckdb", root / "host"


@pytest.fixture(params=["redis", "rabbitmq"])
def broker(request, tmp_path):
    if request.param == "redis":
        with PrivateRedis(tmp_path / "redis") as server:
            yield "redis", server
        return
    if not shutil.which("rabbitmq-server"):
        pytest.fail("needs rabbitmq-server (a second node of it is started for the test)")
    with PrivateRabbitMQ(str(os.getpid())) as server:
        yield "rabbitmq", server


def test_the_broker_restarted_mid_run(tmp_path, place, broker):
    kind, server = broker
    name = f"restart-{kind}"
    db, workdir = place
    before = common.seed(db, name)
    inv = _inventory(tmp_path / "inv.yml", workdir, server.url, getattr(server, "api_url", None))
    exp = write(tmp_path / f"{name}.yaml", EXPERIMENT.format(name=name, broker=kind))
    fault = common.Fault(workdir, delay=3.0, inject=lambda run_id: server.restart())
    fault.start()
    proc = common.cmx_run(exp, db, "--inventory", str(inv))
    out, err = common.finish(proc)
    fault.finish()
    assert fault.error is None, fault.error
    assert fault.at, "the first run never got under way"
    common.assert_no_traceback(out, err)
    assert proc.returncode == 1 or proc.returncode == 0, out[-3000:] + err[-3000:]

    runs = query(
        db,
        """SELECT "params.tasks", status, error, run_id, epoch(finished_at) FROM runs
                        WHERE experiment = ? AND run_id NOT LIKE 'earlier-%' ORDER BY started_at""",
        [name],
    )
    assert [n for n, *_ in runs] == [1500, 100], runs
    (_, status, error, run_id, finished), (_, next_status, _, next_id, _) = runs
    assert run_id == fault.run_id
    # The run lost its broker: failed, saying which (never its password), or ok if nothing was lost.
    assert status in ("failed", "ok"), runs
    assert (proc.returncode == 1) == (status == "failed"), (proc.returncode, runs)
    if status == "failed":
        assert f"broker {kind} at 127.0.0.1:{server.port}" in error, error
        assert "guest" not in error
    m = common.assert_accounting(db, run_id)
    assert 0 < m["tasks_published"] <= 1500, m
    if status == "ok":
        assert m["tasks_lost"] == 0 and m["tasks_completed"] == 1500, m
    # Bounded: the driver gave the run up (or finished it) soon after the restart, well before
    # its run_timeout; the end is stored once every process of the run is stopped.
    driver = json.loads((db.parent / "artifacts" / run_id / "localhost" / "driver.json").read_text())
    assert driver["finished_at"] - fault.at <= 45, (driver["finished_at"] - fault.at, driver)
    assert finished - fault.at <= 120, finished - fault.at
    # The sweep's next run is ok, and lost nothing.
    assert next_status == "ok", runs
    m = common.assert_accounting(db, next_id)
    assert (m["tasks_published"], m["tasks_completed"], m["tasks_lost"]) == (100, 100, 0), m
    assert common.stored(db, name) == before  # the database opens; the earlier run is intact
    common.assert_nothing_left(db)

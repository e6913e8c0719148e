"""The environment fingerprint of a real sweep: the worker and the driver report the versions they
run with, the hosts row has the governor and both servers' versions, as the servers say."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import pytest

from cmx.workloads.runtime.fingerprint import PACKAGES, governor
from tests.conftest import query, sweep

pytestmark = pytest.mark.integration


def installed(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def test_packages_hold_the_versions_the_worker_and_the_driver_ran_with(tmp_path):
    db = sweep(
        tmp_path,
        "fingerprint",
        """
        workload:
          name: throughput
          params: {tasks: 20, mode: backlog}
        matrix:
          backend: [redis, postgres]
        fixed: {broker: rabbitmq, pool: threads, concurrency: 2}
        limits: {run_timeout: 2m}
    """,
    )
    runs = [r for (r,) in query(db, "SELECT run_id FROM runs WHERE status = 'ok'")]
    assert len(runs) == 2
    expected = {name: installed(name) for name in PACKAGES}
    assert expected["celery"] and expected["kombu"]  # this venv has Celery: the comparison means something
    for run_id in runs:
        rows = query(db, "SELECT host, role, name, version FROM packages WHERE run_id = ?", [run_id])
        for role in ("worker", "driver"):
            assert {n: v for h, r, n, v in rows if r == role and h == "localhost"} == expected, (run_id, role)
    import psycopg2
    import redis

    redis_version = redis.Redis.from_url("redis://127.0.0.1:6379/1").info("server")["redis_version"]
    with psycopg2.connect("postgresql://postgres@127.0.0.1:5432/postgres") as pg, pg.cursor() as cur:
        cur.execute("SHOW server_version")
        pg_version = cur.fetchone()[0]
    hosts = query(
        db,
        "SELECT r.backend, h.governor, h.broker_version, h.backend_version "
        "FROM hosts h JOIN runs r USING (run_id) ORDER BY r.backend",
    )
    assert [(b, g) for b, g, _, _ in hosts] == [("postgres", governor()), ("redis", governor())]
    assert all(bv.startswith("RabbitMQ ") for _, _, bv, _ in hosts), hosts
    assert [v for *_, v in hosts] == [f"postgresql {pg_version}", f"redis {redis_version}"]

"""Tasks lost before the queue (issue 42): never silent, and never a run that waits out its
``run_timeout`` for them.

Real RabbitMQ (this machine's, in a vhost of the test's own), real workers, a real sweep. The fast
publisher publishes ``mandatory``: a message no queue takes comes back (``basic.return``) instead of
being confirmed and dropped. A run whose tasks were lost before the queue (returned, or gone before
a worker took them) ends as soon as the rest finished or nothing is left anywhere: failed, its error
naming how many, those counted ``tasks_lost`` and the rest stored as they ran.
"""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import cmx, local_inventory, query, rabbit_api, write

pytestmark = pytest.mark.integration


api = rabbit_api


@pytest.fixture
def vhost():
    name = f"cmx-lost-{uuid.uuid4().hex[:8]}"
    api("PUT", f"vhosts/{name}")
    api("PUT", f"permissions/{name}/guest", {"configure": ".*", "write": ".*", "read": ".*"})
    yield name
    api("DELETE", f"vhosts/{name}")


def test_the_fast_publisher_counts_every_message_no_queue_took(tmp_path, monkeypatch, vhost):
    """The run's queue deleted after the publisher's first batch: RabbitMQ confirms what no queue
    takes and drops it; published ``mandatory``, each comes back and is named in ``returned``."""
    monkeypatch.setenv("CMX_BROKER_URL", f"amqp://guest:guest@127.0.0.1:5672/{vhost}")
    from cmx.workloads.app.factory import create_app
    from cmx.workloads.drive import publisher
    from cmx.workloads.runtime.spec import RunSpec

    spec = RunSpec(
        run_id="lost" + uuid.uuid4().hex[:8],
        experiment="t",
        cell_id="c",
        repeat=1,
        workload="throughput",
        broker="rabbitmq",
    )
    app = create_app(spec, tmp_path, "h")
    calls, returned = [], []

    def check(what):
        calls.append(what)
        if len(calls) == 1:  # the first batch (5 messages) written: from here on no queue is there
            with app.connection_for_write() as conn:
                conn.default_channel.queue_delete(spec.queue)

    publisher.publish_backlog(app, "cmx.throughput.noop", ("x",), 100, "h", check, returned=returned)
    assert len(calls) == 20
    assert 95 <= len(returned) <= 100 and len(set(returned)) == len(returned), returned
    assert all(len(i) == 36 for i in returned)  # the tasks' own ids

    # With its queue there, none comes back.
    from kombu import Queue

    with app.connection_for_write() as conn:
        Queue(spec.queue).bind(conn.default_channel).declare()
    again: list[str] = []
    publisher.publish_backlog(app, "cmx.throughput.noop", ("x",), 100, "h", returned=again)
    assert again == []
    with app.connection_for_write() as conn:
        assert conn.default_channel.queue_declare(spec.queue, passive=True).message_count == 100
        conn.default_channel.queue_delete(spec.queue)


#: A user's workload that loses 3 of its 20 tasks before the queue, two ways: ``get`` takes them
#: off the queue before any worker consumes (as if the broker dropped them: nothing says so);
#: ``return`` publishes them (the fast publisher) while the run's queue is gone (the broker returns them).
LOSING = '''
from kombu import Queue
from pydantic import Field

from cmx.workloads.catalog.base import Workload, WorkloadParams
from cmx.workloads.catalog.throughput import Throughput
from cmx.workloads.drive import publisher as fast


class LosingParams(WorkloadParams):
    how: str = Field("get")


class Losing(Workload):
    name = "losing"
    Params = LosingParams

    def register_tasks(self, app):
        Throughput().register_tasks(app)

    def drive(self, ctx, params):
        noop = ctx.app.tasks["cmx.throughput.noop"]
        ctx.wait_for_workers()
        if params.how == "get":
            for _ in range(20):
                noop.apply_async(("x",))
            with ctx.app.connection_for_write() as conn:
                channel = conn.default_channel
                taken = 0
                while taken < 3:
                    taken += channel.basic_get(ctx.spec.queue, no_ack=True) is not None
        else:
            real = fast.publisher_for

            def queue_gone(*args, **kwargs):
                pub = real(*args, **kwargs)
                with ctx.app.connection_for_write() as conn:
                    conn.default_channel.queue_delete(ctx.spec.queue)
                return pub

            fast.publisher_for = queue_gone
            try:
                fast.publish_backlog(ctx.app, noop.name, ("x",), 3, ctx.host, returned=ctx.returned)
            finally:
                fast.publisher_for = real
            ctx.declare_queues()
            fast.publish_backlog(ctx.app, noop.name, ("x",), 17, ctx.host, returned=ctx.returned)
        ctx.start_consuming()
        ctx.wait_completed(20)
'''


def inventory(tmp_path, vhost):
    """This machine as every group's one host, the broker the test's own vhost."""
    return local_inventory(
        tmp_path / "inv.yml",
        tmp_path / "hostwork" / "localhost",
        brokers={
            "broker_url": f"amqp://guest:guest@127.0.0.1:5672/{vhost}",
            "rabbitmq_api_url": "http://guest:guest@127.0.0.1:15672",
        },
    )


def test_a_run_that_lost_tasks_before_the_queue_ends_at_once_and_says_how_many(tmp_path, vhost):
    write(tmp_path / "losing.py", LOSING)
    inv = inventory(tmp_path, vhost)
    exp = write(
        tmp_path / "exp.yaml",
        """
        name: lost-before-queue
        workload: {name: ./losing.py:Losing}
        fixed: {broker: rabbitmq, backend: none, pool: threads, concurrency: 2}
        matrix: {params.how: [get, return], queue_type: [classic, quorum]}
        limits: {run_timeout: 90s}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = {
        (how, qt): (status, error, finished - started)
        for how, qt, status, error, started, finished in query(
            db, 'SELECT "params.how", queue_type, status, error, epoch(started_at), epoch(finished_at) FROM runs'
        )
    }
    assert sorted(runs) == [(h, q) for h in ("get", "return") for q in ("classic", "quorum")], runs
    why = {
        "get": (
            "no worker counted them: the run's queue is empty, no worker holds a task of the run, "
            "and none finished for 10s"
        ),
        "return": "the broker returned them unroutable (basic.return): no queue took them",
    }
    for (how, _), (status, error, seconds) in runs.items():
        assert (status, error) == ("failed", f"3 of 20 tasks lost before the queue: {why[how]}"), runs
        assert seconds < 60, runs  # not the 90 s run_timeout
    metrics = {
        (how, qt, n): v
        for how, qt, n, v in query(
            db,
            'SELECT r."params.how", r.queue_type, m.name, m.value FROM metrics m JOIN runs r USING (run_id) '
            "WHERE m.name IN ('tasks_published', 'tasks_completed', 'tasks_lost', 'tasks_not_run')",
        )
    }
    for how, qt in runs:
        assert [
            metrics.get((how, qt, n)) for n in ("tasks_published", "tasks_completed", "tasks_lost", "tasks_not_run")
        ] == [20, 17, 3, 0], metrics


def test_countdown_tasks_the_broker_delays_are_not_taken_for_lost(tmp_path, vhost):
    """The false-alarm side, with known answers: every task has a countdown longer than the
    verdict's 10 s, so for 13 s nothing finishes and the run's queue is empty. On either queue type
    the worker holds them (Celery reserves ETA tasks; it delays them in RabbitMQ's delayed-delivery
    queues only behind an exchange that is not direct, and the run's queues are direct), and the
    verdict sees them held: both runs end ok with every task run. It fails if a held ETA task is
    not counted (the classic run ends as lost after 10 s)."""
    inv = inventory(tmp_path, vhost)
    exp = write(
        tmp_path / "exp.yaml",
        """
        name: countdown-not-lost
        workload: {name: mixed, params: {tasks: 10, long_every: 0, rate: 50, countdown_s: 13}}
        fixed: {broker: rabbitmq, backend: none, pool: threads, concurrency: 2}
        matrix: {queue_type: [classic, quorum]}
        limits: {run_timeout: 90s}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = query(
        db,
        "SELECT r.queue_type, r.status, r.error, m.value FROM runs r JOIN metrics m USING (run_id) "
        "WHERE m.name = 'tasks_completed' ORDER BY 1",
    )
    assert rows == [("classic", "ok", None, 10), ("quorum", "ok", None, 10)], rows

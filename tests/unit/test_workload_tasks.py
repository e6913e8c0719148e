"""A workload's tasks belong to the app they were registered on.

Celery's ``@app.task`` is shared by default: every app finalized later in the same process is
given the first app's callable under that name, and a closure over the first run's state would
then serve the second (Celery 5.6+ warns "already registered to a different callable").
"""

from __future__ import annotations

import warnings

import pytest
from celery import Celery

from cmx.workloads.catalog.registry import WORKLOADS


# tasks: the user's app; replay: the recorded names (test below)
@pytest.mark.parametrize("name", sorted(n for n in WORKLOADS if n not in ("tasks", "replay")))
def test_each_app_runs_its_own_callables(name):
    apps = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # DuplicateTaskNameWarning included
        for _ in range(2):
            app = Celery(f"t-{name}", set_as_current=False)
            WORKLOADS[name]().register_tasks(app)
            app.finalize()
            apps.append(app)
        later = Celery("later", set_as_current=False)
        later.finalize()
    first, second = ({k: t for k, t in a.tasks.items() if k.startswith("cmx.")} for a in apps)
    assert first and sorted(first) == sorted(second)
    for task_name in first:
        assert first[task_name].run is not second[task_name].run, task_name
    assert not [k for k in later.tasks if k.startswith("cmx.")]  # nothing leaks into other apps


def test_replay_registers_each_recorded_name_on_each_app_apart(tmp_path):
    from cmx.engine.replay import capture
    from cmx.workloads.catalog.replay import Replay, ReplayParams

    rows = [
        {"uuid": u, "name": n, "sent": 1.0 + i, "runtime": 0.01}
        for i, (u, n) in enumerate([("a", "shop.render"), ("b", "shop.charge"), ("c", "celery.chord_unlock")])
    ]
    capture.write_profile([{c: r.get(c) for c in capture.COLUMNS} for r in rows], tmp_path / "p.parquet")
    params = ReplayParams(profile=str(tmp_path / "p.parquet"))
    apps = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            app = Celery("t-replay", set_as_current=False)
            workload = Replay()
            workload.setup(params)
            workload.register_tasks(app)
            app.finalize()
            apps.append(app)
    first, second = ({k: t for k, t in a.tasks.items() if k.startswith("shop.")} for a in apps)
    assert sorted(first) == ["shop.charge", "shop.render"] and sorted(second) == sorted(first)
    assert all(first[k].run is not second[k].run for k in first)  # Celery's own chord_unlock: not replayed


def test_a_replayed_task_that_spawns_spends_its_runtime_less_what_sending_takes(tmp_path, monkeypatch):
    """A recorded runtime holds the original's sends of the tasks it spawned (Celery sends a chain's next
    link inside the runtime): the replayed task sleeps that much less, what sending takes here (the
    outside check of issue 40: a 5 ms chain link ran 2 ms longer replayed). Real sends to Redis."""
    import uuid as uuids

    from kombu import Connection

    from cmx.workloads.catalog import replay
    from cmx.workloads.catalog.replay_plan import Call

    url, queue = "redis://127.0.0.1:6379/12", f"cmx-test-spawn-{uuids.uuid4().hex[:8]}"
    app = Celery("t-spawn", broker=url, set_as_current=False)
    for name in ("shop.a", "shop.b"):
        replay._register(app, name)
    asked: list[float] = []
    monkeypatch.setattr(replay, "spend", lambda seconds, work: asked.append(seconds))
    monkeypatch.setattr(replay, "SENDS", replay.deque(maxlen=20))
    child = Call("shop.b", queue, 0.005, 10).as_spec()
    try:
        for _ in range(3):
            app.tasks["shop.a"].run(runtime=0.05, children=[child, child])
        app.tasks["shop.b"].run(runtime=0.05)
    finally:
        import redis

        with Connection(url) as conn:
            sent = conn.default_channel.queue_purge(queue)
            conn.default_channel.queue_delete(queue)
        db = redis.Redis.from_url(url)
        for key in db.scan_iter(f"*{queue}*"):  # kombu's binding records of the queue and its exchange
            db.delete(key)
    assert sent == 6  # every spawned task really sent
    assert len(replay.SENDS) == 6 and 0 < sorted(replay.SENDS)[3] < 0.01  # the first send opened the connection
    assert asked[0] == 0.05  # nothing known yet
    assert all(0.05 - 2 * 0.01 < a < 0.05 for a in asked[1:3])  # less two sends, the median of those before
    assert asked[3] == 0.05  # a task that spawns nothing spends its whole runtime

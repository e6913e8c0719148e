"""A replayed task's real sends to Redis (moved from tests/unit/test_workload_tasks.py: it needs a
live Redis, and a unit test opens no socket). Its own Redis db 12 and a queue named per run. ~1 s."""

from __future__ import annotations

import pytest
from celery import Celery

from tests.conftest import forget_redis

pytestmark = pytest.mark.integration


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
            app.tasks["shop.a"].run(runtime=0.5, children=[child, child])
        app.tasks["shop.b"].run(runtime=0.5)
    finally:
        with Connection(url) as conn:
            sent = conn.default_channel.queue_purge(queue)
        forget_redis(url, queue)
    assert sent == 6  # every spawned task really sent
    # A send takes about a millisecond here, up to tens on a loaded machine (the suite runs in
    # parallel); the bounds hold for sends up to 100 ms (the first one opens the connection).
    assert len(replay.SENDS) == 6 and 0 < sorted(replay.SENDS)[3] < 0.1
    assert asked[0] == 0.5  # nothing known yet
    assert all(0.5 - 2 * 0.1 < a < 0.5 for a in asked[1:3])  # less two sends, the median of those before
    assert asked[3] == 0.5  # a task that spawns nothing spends its whole runtime

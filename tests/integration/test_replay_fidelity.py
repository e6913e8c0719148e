"""Replay fidelity (issue 40 point 5): a small Celery app no part of cmx, with three task types and a
burst, runs on the real Redis with events on; `cmx capture` records it; `cmx run` replays the
profile in a small sweep (workload replay); per task name the replayed count, arrival rate and
service time p50/p95 must match the capture (2 %, 5 %, 10 %) in every run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import duckdb
import pytest

from tests.conftest import CMX, cmx, forget_redis, query, write

pytestmark = pytest.mark.integration

URL = "redis://127.0.0.1:6379/14"

APP = textwrap.dedent("""
    import random, time
    from celery import Celery
    app = Celery("shop", broker="{url}")
    app.conf.task_send_sent_event = True
    app.conf.worker_send_task_events = True
    app.conf.task_default_queue = "{q}"

    @app.task(name="shop.render")
    def render(page):
        time.sleep(0.05)  # 10 % of it outlasts a loaded machine's scheduling jitter

    @app.task(name="shop.charge")
    def charge(order, seconds):
        time.sleep(seconds)

    @app.task(name="shop.report")
    def report(blob):
        time.sleep(0.3)
""")

# ~8 s of traffic: render (50 ms) at 25/s, charge at 6/s with runtimes spread 40-160 ms, report at 1/s
# with a 10 kB payload, and a burst of 120 renders at 4 s.
PRODUCER = textwrap.dedent("""
    import random, time
    import shop
    rng = random.Random(7)
    t0 = time.time()
    events = [(i / 25, "render") for i in range(200)] + [(i / 6, "charge") for i in range(48)]
    events += [(i, "report") for i in range(8)] + [(4.0 + i * 0.002, "render") for i in range(120)]
    for at, name in sorted(events):
        time.sleep(max(0.0, t0 + at - time.time()))
        if name == "render":
            shop.render.delay("p" * 200)
        elif name == "charge":
            shop.charge.delay("o" * 1000, rng.uniform(0.04, 0.16))
        else:
            shop.report.delay("r" * 10000)
""")

EXPERIMENT = """
name: replay-fidelity-{tag}
repeats: 1
workload:
  name: replay
  params: {{profile: shop.parquet, work: sleep, mode: exact}}
fixed:
  broker: redis
  backend: none
  pool: threads
  prefetch_multiplier: 1
matrix:
  concurrency: [16, 32]
include:  # the fitted arrival processes, at twice the captured rates
  - {{concurrency: 32, params.mode: fitted, params.rate: 2.0}}
limits: {{run_timeout: 2m}}
"""


@pytest.fixture
def shop(tmp_path):
    q = f"shop-{uuid.uuid4().hex[:8]}"
    (tmp_path / "shop.py").write_text(APP.format(url=URL, q=q))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "shop",
            "worker",
            "-E",
            "-P",
            "threads",
            "-c",
            "32",
            "-Q",
            q,
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "warning",
        ],
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )
    try:
        yield tmp_path, env
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        forget_redis(URL, q)


def per_name_captured(path) -> dict[str, tuple]:
    """name -> (count, arrival rate, runtime p50, runtime p95) of the profile."""
    rows = duckdb.sql(
        f"SELECT name, count(*), (count(*) - 1) / (max(sent) - min(sent)), "
        f"quantile_cont(runtime, 0.5), quantile_cont(runtime, 0.95) FROM '{path}' GROUP BY name"
    )
    return {r[0]: r[1:] for r in rows.fetchall()}


# alone: its known answer is the replayed tasks' runtimes, p95 included, which other tests' load on
# 2 cores stretches (in parallel, a 55 ms p95 replayed as 66 ms) (tests/alone.py).
@pytest.mark.alone
def test_replay_matches_the_capture_per_task_name(shop):
    folder, env = shop
    profile = folder / "shop.parquet"
    capture = subprocess.Popen(
        [*CMX, "capture", "--out", str(profile), "--duration", "16"],
        env={**os.environ, "CMX_CAPTURE_BROKER_URL": URL},
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)  # the receiver's queue is bound before the traffic starts
    (folder / "producer.py").write_text(PRODUCER)
    subprocess.run([sys.executable, "producer.py"], cwd=folder, env=env, check=True, timeout=60)
    _, err = capture.communicate(timeout=60)
    assert capture.returncode == 0, err
    captured = per_name_captured(profile)
    assert {n: c[0] for n, c in captured.items()} == {"shop.render": 320, "shop.charge": 48, "shop.report": 8}

    exp = write(folder / "replay.yaml", EXPERIMENT.format(tag=uuid.uuid4().hex[:6]))
    db = folder / "cmx.duckdb"
    run = cmx("run", str(exp), "--db", str(db), timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    replayed = query(
        db,
        "SELECT run_id, name, count(*), count(DISTINCT task_id), "
        "(count(*) - 1) / (max(sent_at) - min(sent_at)), "
        "quantile_cont(t.finished_at - t.started_at, 0.5), "
        "quantile_cont(t.finished_at - t.started_at, 0.95) "
        "FROM tasks t JOIN runs USING (run_id) WHERE state = 'SUCCESS' "
        "AND \"params.mode\" = 'exact' GROUP BY ALL ORDER BY ALL",
    )
    assert len({r[0] for r in replayed}) == 2  # the sweep's two exact cells
    for run_id, name, n, distinct, rate, p50, p95 in replayed:
        count, want_rate, want_p50, want_p95 = captured[name]
        where = f"{name} in {run_id}"
        assert abs(n - count) <= 0.02 * count and distinct == n, where
        assert rate == pytest.approx(want_rate, rel=0.05), where
        assert p50 == pytest.approx(want_p50, rel=0.10), where
        assert p95 == pytest.approx(want_p95, rel=0.10), where
    lost = query(db, "SELECT sum(value) FROM metrics WHERE name IN ('tasks_lost', 'tasks_duplicated')")[0][0]
    assert lost == 0
    # fitted: per name Poisson arrivals at twice the captured rate over the profile's span
    span = duckdb.sql(f"SELECT max(sent) - min(sent) FROM '{profile}'").fetchall()[0][0]
    fitted = dict(
        query(
            db,
            "SELECT name, count(*) FROM tasks JOIN runs USING (run_id) "
            "WHERE \"params.mode\" = 'fitted' AND state = 'SUCCESS' GROUP BY name",
        )
    )
    for name, (_, want_rate, _, _) in captured.items():
        expected = 2.0 * want_rate * span
        assert abs(fitted[name] - expected) <= 4 * expected**0.5 + 2, (name, fitted[name], expected)


CANVAS_APP = textwrap.dedent("""
    import time
    from celery import Celery
    app = Celery("canv", broker="{url}", backend="{url}")
    app.conf.task_send_sent_event = True
    app.conf.worker_send_task_events = True
    app.conf.task_default_queue = "{q}"
    app.conf.task_routes = {{"canv.merge": {{"queue": "{q}.merge"}}}}

    @app.task(name="canv.fetch")
    def fetch(*x):
        time.sleep(0.05)
        return 1

    @app.task(name="canv.merge")
    def merge(*x):
        time.sleep(0.02)
        return 2
""")

CANVAS_PRODUCER = textwrap.dedent("""
    import time
    from celery import chain, chord
    from canv import fetch, merge
    for i in range(3):
        chord([fetch.s() for _ in range(4)])(merge.s())
        time.sleep(1.0)
        chain(fetch.s(), merge.s(), merge.s()).apply_async()
        time.sleep(1.0)
""")


def test_a_recorded_chord_is_replayed_as_a_chord(tmp_path):
    """Three chords of 4 and three chains of 3, captured from a solo worker: the replay sends each
    chord as a Celery chord (its body starts after all of its header ended) and each chain link
    from the task before it (its parent). merge runs on a queue of its own: the replay's workers
    consume both recorded queues (as queues of the run) or its merges would never run."""
    q = f"canv-{uuid.uuid4().hex[:8]}"
    (tmp_path / "canv.py").write_text(CANVAS_APP.format(url=URL, q=q))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "canv",
            "worker",
            "-E",
            "-P",
            "solo",
            "-Q",
            f"{q},{q}.merge",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "warning",
        ],
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )
    try:
        capture = subprocess.Popen(
            [*CMX, "capture", "--out", str(tmp_path / "canv.parquet"), "--duration", "12"],
            env={**os.environ, "CMX_CAPTURE_BROKER_URL": URL},
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)
        (tmp_path / "producer.py").write_text(CANVAS_PRODUCER)
        subprocess.run([sys.executable, "producer.py"], cwd=tmp_path, env=env, check=True, timeout=60)
        _, err = capture.communicate(timeout=60)
        assert capture.returncode == 0, err
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        forget_redis(URL, q)
    shown = subprocess.run(
        [*CMX, "profile", "show", str(tmp_path / "canv.parquet"), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert {r["name"]: r["queue"] for r in json.loads(shown.stdout)} == {"canv.fetch": q, "canv.merge": f"{q}.merge"}
    # what tells a chord's body from a chain's next task: the body's args lead with its 4 header results
    with duckdb.connect() as con:
        leads = con.execute(
            "SELECT args_lead_list, count(*) FROM read_parquet(?) WHERE name = 'canv.merge' GROUP BY 1 ORDER BY 1",
            [str(tmp_path / "canv.parquet")],
        ).fetchall()
    assert leads == [(4, 3), (None, 6)], leads
    write(
        tmp_path / "canv.yaml",
        f"""
        name: replay-canvas-{uuid.uuid4().hex[:6]}
        repeats: 1
        workload: {{name: replay, params: {{profile: canv.parquet}}}}
        fixed: {{broker: redis, backend: redis, pool: threads, concurrency: 8, prefetch_multiplier: 1}}
        limits: {{run_timeout: 2m}}
    """,
    )
    db = tmp_path / "cmx.duckdb"
    run = cmx("run", str(tmp_path / "canv.yaml"), "--db", str(db), timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    counts = dict(query(db, "SELECT name, count(*) FROM tasks WHERE state = 'SUCCESS' GROUP BY name"))
    assert counts == {"canv.fetch": 3 * 4 + 3, "canv.merge": 3 + 3 * 2}
    # Each merge that is a chord body starts after the 4 fetches sent with it all ended: in the
    # replay the headers of one chord share their intended send time. A header ends (Celery stores
    # its result, which sends the body) at least its 50 ms sleep after its start stamp, and before
    # its finish stamp (taken after the store: under load the body may start first), so the body
    # must start 50 ms or more after the last header started.
    bodies = query(
        db,
        """
        WITH h AS (SELECT intended_at, max(started_at) AS last_start, count(*) AS n FROM tasks
                   WHERE name = 'canv.fetch' GROUP BY intended_at HAVING count(*) = 4)
        SELECT h.n, min(t.started_at) >= h.last_start + 0.05 FROM h JOIN tasks t
          ON t.name = 'canv.merge' AND t.intended_at = h.intended_at GROUP BY h.intended_at, h.n, h.last_start""",
    )
    assert len(bodies) == 3 and all(after for _, after in bodies), bodies

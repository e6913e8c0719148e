"""Issue 49 from real runs: a real worker whose task's duration the test sets each night, with several
changes a few nights apart and the latest night among them. Each change is found at its night at
its size, and the morning's gate fails exactly on the nights a regression begins.

Cost: eleven nights of `cmx run` (3 runs of 60 tasks of 14-28 ms on 2 threads each) and a `cmx
trend` after each: about 2 min on an idle machine (16 min at a load of 12 on 2 cores). Its own
work dir and Redis database (9), so no other sweep on this machine holds its host."""

from __future__ import annotations

import json
import statistics

import pytest

from tests.conftest import cmx, local_inventory, write

pytestmark = pytest.mark.integration

#: The user's task: it sleeps as long as the file next to the experiment says (read on each call).
MODULE = '''
from celery import shared_task
import time


@shared_task
def nap(path):
    with open(path) as f:
        time.sleep(float(f.read()))
'''

#: Each night's task duration (ms): a regression fixed the next night, an improvement three nights
#: later, and a regression on the latest night, three nights after it.
NAPS = [20, 20, 20, 28, 20, 20, 20, 14, 14, 14, 20]
CHANGES = {4: 40.0, 5: -28.6, 8: -30.0, 11: 42.9}  # night (1-based) → its true change, %
REGRESSIONS = [4, 11]


def test_close_changes_from_real_runs_are_found_at_their_nights_and_sizes_and_gate_their_first_nights(tmp_path):
    nap = tmp_path / "nap_s"
    write(tmp_path / "napping.py", MODULE)
    exp = write(
        tmp_path / "close.yaml",
        f"""
        name: close
        repeats: 3
        workload:
          name: tasks
          params: {{module: napping.py, task: napping.nap, args: ["{nap}"], tasks: 60, mode: backlog}}
        fixed: {{broker: redis, pool: threads, concurrency: 2}}
        limits: {{run_timeout: 2m}}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    inv = local_inventory(
        tmp_path / "inv.yml", tmp_path / "hostwork" / "localhost", brokers={"broker_url": "redis://127.0.0.1:6379/9"}
    )
    failed = []
    for night, ms in enumerate(NAPS, 1):
        nap.write_text(str(ms / 1000))
        proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), "--tag", f"night={night}", timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        gate = cmx(
            "trend", "close", "--db", str(db), "--by", "tag.night", "-m", "service_time_p50_s", "--fail-on", "worse"
        )
        if gate.returncode:
            failed.append(night)
            # the cell by the dimensions its experiment names, never by its id alone
            named = "worse: service_time_p50_s of broker=redis concurrency=2 pool=threads at "
            assert named in gate.stderr, gate.stderr
    trend = cmx("trend", "close", "--db", str(db), "--by", "tag.night", "-m", "service_time_p50_s", "-f", "json")
    [series] = json.loads(trend.stdout)["series"]
    found = {int(c["at"]): c["change_pct"] for c in series["changes"]}
    assert sorted(found) == sorted(CHANGES), series["changes"]
    # The true size is the service time's between the true segments (the median of their nights'
    # medians): Celery's own share of a task (2-3 ms on a loaded machine) dilutes the nap's change.
    medians = [p["median"] for p in series["points"]]
    edges = [1, *CHANGES, len(NAPS) + 1]
    for k, night in enumerate(CHANGES, 1):
        before = statistics.median(medians[edges[k - 1] - 1 : night - 1])
        after = statistics.median(medians[night - 1 : edges[k + 1] - 1])
        assert abs(found[night] - 100 * (after / before - 1)) <= 3.0, (night, series["changes"])
    assert failed == REGRESSIONS, failed

"""worker_starved_share (engine/results/sql/metrics.sql): the share of a run, from its first receipt
to its last finish, in which no task was in a worker while a task waited in the broker, in
stretches of 0.5 s or more; on hand-made artifacts with exact stamps. And the summary's line for a
starved cell (analysis/summary.py)."""

from __future__ import annotations

import json

import pytest

from cmx.analysis import summary
from cmx.engine.results import db
from cmx.engine.results.ingest import HostInfo, ingest_run
from cmx.workloads.vocab import metrics as M


def csv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *[",".join("" if v is None else str(v) for v in r) for r in rows]]) + "\n")


def starved_share(tmp_path, tasks, worker_offset=0.0):
    """``tasks``: (sent, received, started, finished) in controller time, one host publishing, one
    running (its stamps written on its own clock: controller time + ``worker_offset``)."""
    run = tmp_path / "artifacts" / "r1"
    ids = [f"t{i}" for i in range(len(tasks))]
    csv(
        run / "d1" / "pub-10.csv",
        "task_id,name,host,pid,intended_at,sent_at",
        [(i, "noop", "d1", 10, s, s) for i, (s, *_) in zip(ids, tasks)],
    )
    w = worker_offset
    csv(
        run / "w1" / "recv-21.csv",
        "task_id,host,pid,received_at",
        [(i, "w1", 21, r + w) for i, (_, r, _, _) in zip(ids, tasks)],
    )
    csv(
        run / "w1" / "exec-21.csv",
        "task_id,name,host,pid,sent_at,started_at,finished_at,state,redelivered",
        [(i, "noop", "w1", 21, s, b + w, f + w, "SUCCESS", 0) for i, (s, _, b, f) in zip(ids, tasks)],
    )
    for host, off in (("d1", 0.0), ("w1", worker_offset)):
        (run / host / "facts.json").write_text(json.dumps({"clock_offset_s": off, "clock_uncertainty_s": 0.0}))
    (run / "d1" / "driver.json").write_text('{"status": "ok"}')
    with db.connect(tmp_path / "r.duckdb") as con:
        hosts = {"d1": HostInfo(groups=("drivers",)), "w1": HostInfo(groups=("workers",))}
        return ingest_run(con, "r1", run, 0.0, hosts).metrics[M.WORKER_STARVED_SHARE]


def test_a_worker_that_takes_one_task_per_wait_is_starved_for_most_of_the_run(tmp_path):
    # Five tasks sent at once at 0; the worker takes one every 2 s and runs it for 0.01 s. From the
    # first receipt (0) to the last finish (8.01), tasks waited until the last receipt at 8, and the
    # worker held none of them but for 4 x 0.01 s in that time: 4 stretches of 1.99 s.
    tasks = [(0.0, 2.0 * i, 2.0 * i, 2.0 * i + 0.01) for i in range(5)]
    assert starved_share(tmp_path, tasks) == pytest.approx(4 * 1.99 / 8.01)


def test_a_worker_that_keeps_up_is_not_starved(tmp_path):
    # A stream: each task received 5 ms after its send, run for 0.1 s; the worker idles between
    # tasks but nothing waits in the broker then.
    tasks = [(i * 0.5, i * 0.5 + 0.005, i * 0.5 + 0.005, i * 0.5 + 0.105) for i in range(10)]
    assert starved_share(tmp_path, tasks) == 0


def test_a_busy_worker_with_a_queue_is_not_starved(tmp_path):
    # A backlog of 4 sent at 0, run back to back from 1 s for 1 s each: tasks wait, the worker works.
    tasks = [(0.0, 1.0 + i, 1.0 + i, 2.0 + i) for i in range(4)]
    assert starved_share(tmp_path, tasks) == 0


def test_a_message_on_its_way_is_not_a_stall(tmp_path):
    # Received 0.15 s after its send while the worker idled: in transit, a stretch under 0.5 s.
    tasks = [(i * 1.0, i * 1.0 + 0.15, i * 1.0 + 0.15, i * 1.0 + 0.2) for i in range(3)]
    assert starved_share(tmp_path, tasks) == 0


def test_a_worker_fetching_one_message_per_round_trip_is_not_starved(tmp_path):
    # A backlog of 400 no-op tasks sent at 0, each received 2 ms after the one before finished and
    # run for 0.1 ms: the worker holds no task 95 % of the time, in 400 gaps of 2 ms: its own pace.
    tasks, t = [], 0.0
    for _ in range(400):
        tasks.append((0.0, t, t, t + 0.0001))
        t += 0.0021
    assert starved_share(tmp_path, tasks) == 0


def test_one_long_stall_among_short_gaps_counts_alone(tmp_path):
    # As above for 200 tasks, then a 1.5 s stall, then 200 more: only the stall counts.
    tasks, t = [], 0.0
    for k in range(400):
        tasks.append((0.0, t, t, t + 0.0001))
        t += 0.0021 + (1.5 if k == 199 else 0)
    span = tasks[-1][3] - tasks[0][1]
    assert starved_share(tmp_path, tasks) == pytest.approx((1.5 + 0.002) / span)


def test_the_share_is_read_on_the_controllers_clock(tmp_path):
    # The worker's clock 30 s behind: the same run as the first test, the same share.
    tasks = [(0.0, 2.0 * i, 2.0 * i, 2.0 * i + 0.01) for i in range(5)]
    assert starved_share(tmp_path, tasks, worker_offset=-30.0) == pytest.approx(4 * 1.99 / 8.01)


def _summary(cell_id: str, shares: list[float]) -> summary.CellSummary:
    from types import SimpleNamespace

    return summary.CellSummary(SimpleNamespace(cell_id=cell_id, values={}), starved=shares)


def test_the_summary_names_a_starved_cell_and_not_the_others():
    cells = [_summary("a", [0.95, 0.97]), _summary("b", [0.0, 0.01]), _summary("c", [])]
    found = summary.starved(cells, lambda c: f"pool={c}")
    assert [c.cell_id for c, _ in found] == ["a"]
    (line,) = [line for _, line in found]
    assert line.startswith("starved: pool=a: ") and "96 % of the run" in line and M.WORKER_STARVED_SHARE in line

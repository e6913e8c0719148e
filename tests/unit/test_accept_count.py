"""Celery's count of accepted tasks loses increments when several threads accept at once (the
threads pool): a worker that ran every task said it ran fewer, and its run waited out run_timeout
(issue 42's "21 lost" classic run, issue 43). workloads/runtime/acceptcount.py makes it exact."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from celery.worker import request, state

N = 40_000


class Req:
    __slots__ = ("id", "name", "__weakref__")

    def __init__(self, i: int):
        self.id, self.name = f"t{i}", "cmx.test.counted"


def accept_all(threads: int = 4) -> int:
    """Accept and finish N tasks from ``threads`` threads, as the threads pool does (each in the thread
    that runs it, through the function Celery's Request calls); Celery's count of them."""
    state.total_count.pop("cmx.test.counted", None)

    def one(r):
        request.task_accepted(r)
        state.task_ready(r)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: what a loaded machine does to a worker
    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, (Req(i) for i in range(N)), chunksize=1))
    finally:
        sys.setswitchinterval(switch)
    return state.total_count.pop("cmx.test.counted", 0)


@pytest.fixture
def unguarded():
    """Celery's own task_accepted, as a worker without cmx's guard has it."""
    from cmx.workloads.runtime import acceptcount

    saved, was = request.task_accepted, acceptcount._guarded
    request.task_accepted, acceptcount._guarded = state.task_accepted, False
    yield
    request.task_accepted, acceptcount._guarded = saved, was


def test_celerys_own_count_loses_tasks_under_threads(unguarded):
    # What the guard is for: without it (Celery as it is), the count falls short. If a Celery
    # release makes this exact, this test says so and the guard can go.
    assert accept_all() < N


def test_the_guarded_count_is_every_task(unguarded):
    from cmx.workloads.runtime import acceptcount

    acceptcount.guard()
    acceptcount.guard()  # once per process: a second call changes nothing
    assert accept_all() == N

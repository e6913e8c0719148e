"""Tasks lost before the queue end a run's wait at once (workloads/drive/lost.py, issue 42): the
rule that says nothing is left of the missing tasks anywhere, sample by sample."""

from __future__ import annotations

import pytest

from cmx.workloads.drive import TasksLost
from cmx.workloads.drive.lost import Vanished


def run(vanished: Vanished, samples) -> list:
    """The verdict after each (seconds, done, held, answered, depth) sample."""
    return [vanished.check(*s) for s in samples]


def test_empty_queue_nothing_held_and_no_completion_for_the_while_is_lost():
    v = Vanished(workers=2, alone=True, after_s=10)
    got = run(v, [(0, 100, 0, 2, 0), (5, 100, 0, 2, 0), (9.9, 100, 0, 2, 0), (10, 100, 0, 2, 0)])
    assert got[:3] == [None] * 3
    assert got[3] == (
        "no worker counted them: the run's queue is empty, no worker holds a task of the run, and none finished for 10s"
    )


@pytest.mark.parametrize(
    "late, why",
    [
        ((6, 101, 0, 2, 0), "a completion starts the while again"),
        ((6, 100, 1, 2, 0), "a task a worker holds may still finish"),
        ((6, 100, 0, 1, 0), "a worker that did not answer may hold some"),
        ((6, 100, 0, 2, 3), "messages in the queue are still to come"),
        ((6, 100, 0, 2, None), "a queue not sampled says nothing"),
    ],
)
def test_anything_left_anywhere_starts_the_while_again(late, why):
    v = Vanished(workers=2, alone=True, after_s=10)
    got = run(v, [(0, 100, 0, 2, 0), late, (12, late[1], 0, 2, 0), (15.9, late[1], 0, 2, 0)])
    assert got == [None] * 4, why
    assert v.check(22, late[1], 0, 2, 0), why  # quiet again since 12 s


def test_with_several_drivers_another_may_not_have_published_yet():
    v = Vanished(workers=1, alone=False, after_s=1)
    assert run(v, [(t, 0, 0, 1, 0) for t in range(0, 100, 10)]) == [None] * 10


def test_the_error_names_the_count_and_the_reason():
    exc = TasksLost(21, 20000, "the broker returned them unroutable")
    assert str(exc) == "21 of 20000 tasks lost before the queue: the broker returned them unroutable"
    assert (exc.lost, exc.total) == (21, 20000)

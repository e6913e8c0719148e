"""tests/alone.py: a test marked ``alone`` runs while no other runs, and no test starts while it
waits (its lock is the kernel's flock, shared by the xdist workers). Threads stand in for workers
(each opens its own file descriptions, so flock treats them as separate holders). ~0.5 s."""

from __future__ import annotations

import threading
import time

from tests.alone import hold


def test_an_alone_test_waits_for_running_tests_and_holds_back_new_ones(tmp_path):
    events: list[str] = []
    shared_in = threading.Event()
    alone_waiting = threading.Event()

    def shared(name: str, seconds: float, started: threading.Event | None = None):
        with hold(tmp_path, alone=False):
            events.append(f"{name} in")
            if started:
                started.set()
            time.sleep(seconds)
            events.append(f"{name} out")

    def alone():
        alone_waiting.set()
        with hold(tmp_path, alone=True):
            events.append("alone in")
            time.sleep(0.1)
            events.append("alone out")

    first = threading.Thread(target=shared, args=("first", 0.3, shared_in))
    first.start()
    shared_in.wait(5)
    waiting = threading.Thread(target=alone)
    waiting.start()
    alone_waiting.wait(5)
    time.sleep(0.05)  # the alone test now waits at the machine, holding the gate
    late = threading.Thread(target=shared, args=("late", 0.0))
    late.start()
    for t in (first, waiting, late):
        t.join(10)
    assert events == ["first in", "first out", "alone in", "alone out", "late in", "late out"]


def test_shared_tests_run_together(tmp_path):
    inside = threading.Barrier(3, timeout=5)

    def shared():
        with hold(tmp_path, alone=False):
            inside.wait()  # all three inside at once, or the barrier breaks

    threads = [threading.Thread(target=shared) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not inside.broken


def test_serial_tests_of_one_name_run_one_at_a_time_beside_others(tmp_path):
    """Two tests of one serial group never overlap; a third, of none, runs beside either."""
    inside: list[str] = []
    overlaps: list[tuple] = []
    beside = threading.Event()

    def serial(name: str):
        with hold(tmp_path, alone=False, serial="db11"):
            inside.append(name)
            overlaps.append(tuple(inside))
            time.sleep(0.2)
            inside.remove(name)

    def other():
        with hold(tmp_path, alone=False):
            deadline = time.monotonic() + 5
            while not inside and time.monotonic() < deadline:
                time.sleep(0.01)
            if inside:
                beside.set()

    threads = [threading.Thread(target=serial, args=(n,)) for n in ("a", "b")] + [threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(overlaps) == [("a",), ("b",)], overlaps  # each alone in its group
    assert beside.is_set()  # the ungrouped test ran while one of the group was inside

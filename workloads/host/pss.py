"""PSS for the sampler: reading it (costly: the kernel walks the page tables) and when to.

A tick reads PSS every ``every``-th tick, spaced further apart when the reads would cost more
than ``budget_percent`` % of a core, and also on any tick whose summed RSS is a new high more
than PSS_NEW_HIGH above every earlier PSS tick's, so a short-lived memory peak gets its PSS
whatever the spacing: at most log(peak/start)/log(1 + PSS_NEW_HIGH) extra rounds per run.
"""

from __future__ import annotations

import math
import os
import re
import time

import psutil

from cmx.workloads.host.procfs import read_proc

#: A tick whose summed RSS exceeds every earlier PSS tick's by this fraction reads PSS too.
PSS_NEW_HIGH = 0.10

_PSS_RE = re.compile(rb"^Pss:\s+(\d+) kB", re.MULTILINE)
_HAVE_SMAPS_ROLLUP = os.path.exists("/proc/self/smaps_rollup")


def read_pss(pid: int) -> int | None:
    """PSS in bytes (walks the page tables: costly for big processes), None if unreadable."""
    if not _HAVE_SMAPS_ROLLUP:
        try:
            return psutil.Process(pid).memory_full_info().pss
        except (psutil.Error, AttributeError):
            return None
    try:
        match = _PSS_RE.search(read_proc(f"/proc/{pid}/smaps_rollup"))
    except OSError:
        return None
    return int(match.group(1)) * 1024 if match else None


class PssSchedule:
    """Which ticks read PSS, and what the reads cost (the sampler's own CPU, in sampler.json)."""

    def __init__(self, every: int, budget_percent: float) -> None:
        self.every, self.budget = every, budget_percent / 100
        self.rounds = 0
        self.cpu_seconds = 0.0
        self._last_tick = -every
        self._not_before = -math.inf
        self._seen_rss = 0  # highest summed RSS of any tick that read PSS

    def due(self, tick: int, now: float) -> bool:
        """Every ``every``-th tick, unless PSS reads would exceed the budget of a core."""
        return tick - self._last_tick >= self.every and now >= self._not_before

    def new_high(self, rss_sum: int) -> bool:
        """A memory high no PSS round has seen yet: read it now, budget or not."""
        return rss_sum > self._seen_rss * (1 + PSS_NEW_HIGH)

    def read(self, tick: int, pids: list[int], rss_sum: int) -> dict[int, int | None]:
        """PSS of ``pids`` (all read for one tick, so per-tick sums stay meaningful)."""
        self._seen_rss = max(self._seen_rss, rss_sum)
        cpu_before = time.thread_time()
        pss = {pid: read_pss(pid) for pid in pids}
        cost = time.thread_time() - cpu_before
        self.cpu_seconds += cost
        self.rounds += 1
        self._last_tick = tick
        if self.budget > 0:
            self._not_before = time.monotonic() + cost / self.budget
        return pss

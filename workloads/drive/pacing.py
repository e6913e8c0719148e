"""Pacing a stream one message at a time: when to send message ``i`` and how many went out late.

Used by the publishers that send one message per call (``apply_async`` loops, the raw broker
baselines); workloads/drive/publisher.py's fast stream sends every message due at a wake-up in one
batch and counts lateness the same way (more than one interval after its intended time).
"""

from __future__ import annotations

import time


class Pacer:
    """Message ``i`` is due at ``t0 + i / rate``; ``rate=None`` paces nothing (a backlog)."""

    def __init__(self, rate: float | None):
        self.stream = rate is not None
        self.t0 = time.time() + 0.05
        self.interval = 1.0 / rate if rate else 0.0
        self.behind = 0  # messages sent more than one interval after their intended time

    def wait(self, i: int) -> float | str:
        """Sleep until message ``i`` is due; its intended send time ("" when not paced)."""
        if not self.stream:
            return ""
        intended = self.t0 + i * self.interval
        delay = intended - time.time()
        if delay > 0:
            time.sleep(delay)
        elif delay < -self.interval:
            self.behind += 1
        return intended

    def note_behind(self, ctx, n: int) -> None:
        """Say in the run's notes when the driver could not keep the rate."""
        if self.behind:
            ctx.notes.append(f"driver fell behind the target rate on {self.behind} of {n} publishes")

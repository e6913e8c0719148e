"""When a fault run ends (workloads/drive/settle.py): ``limits.settle`` without progress, counted
from the round that first saw the last fault over. The rounds here are slow on purpose, as the real
ones are while no worker answers (the progress poll waits its whole second): counted from the round
before, a 3 s settle ended a run 2 s after the replacement worker was ready, while it ran the
redelivered 2 s tasks (tests/faults/test_fault_dimension.py, term_worker, in the full suite).

The context is a stand-in for the driver's (a fixed clock of rounds, no broker): what is tested is
the rule, not Celery."""

from __future__ import annotations

import time
from types import SimpleNamespace

from cmx.workloads import faults
from cmx.workloads.runtime import workerevents as we
from cmx.workloads.drive import settle


class _Rounds:
    """A driver context whose progress poll takes ``round_s`` (of a fake clock) and whose fault is
    over from ``over_at`` on; the clock reads when each round ended."""

    def __init__(self, monkeypatch, round_s: float, over_at: float):
        self.t, self.round_s, self.over_at = 0.0, round_s, over_at
        monkeypatch.setattr(settle.time, "monotonic", lambda: self.t)
        monkeypatch.setattr(settle.time, "sleep", lambda s: setattr(self, "t", self.t + s))
        self.spec = SimpleNamespace(worker_nodes=["cmx@w1"], faults=faults.parse("term_worker@0.5"), settle_s=3.0)
        self.app = SimpleNamespace(
            connection_for_read=lambda: SimpleNamespace(release=lambda: None),
            control=SimpleNamespace(broadcast=self._poll),
        )
        self.queue_samples: list = []

    def _poll(self, *args, **kwargs):
        self.t += self.round_s  # nobody answers: the poll waits its whole timeout
        return []

    def queue_depth(self, conn):
        return 0

    def worker_events(self):
        return (
            [we.WorkerEvent(we.FAULT_END, "w1", time.time(), index=0, fault="term_worker@0.5")]
            if self.t >= self.over_at
            else []
        )

    def check_deadline(self, what: str) -> None:
        assert self.t < 600, what


def test_settling_starts_when_the_fault_is_seen_over(monkeypatch):
    ctx = _Rounds(monkeypatch, round_s=1.0, over_at=4.5)
    settle.wait_settled(ctx, poll_s=0.2)
    # Rounds end at 1.0, 2.2, 3.4, 4.6 (the first to see the fault over), ...: settled 3 s after 4.6.
    assert 7.6 <= ctx.t < 7.6 + 1.2 + 1e-9, ctx.t


class _TwoHosts(_Rounds):
    """A fault on every worker host (``:all``): h1's part is over at ``over_at``, h2's at ``h2_at``."""

    def __init__(self, monkeypatch, round_s: float, over_at: float, h2_at: float):
        super().__init__(monkeypatch, round_s, over_at)
        self.h2_at = h2_at
        self.spec = SimpleNamespace(
            worker_nodes=["cmx@h1", "cmx@h2"], faults=faults.parse("kill_worker@0.5:all"), settle_s=3.0
        )

    def worker_events(self):
        return [
            we.WorkerEvent(we.FAULT_END, h, time.time(), index=0, fault="kill_worker@0.5:all")
            for h, at in (("h1", self.over_at), ("h2", self.h2_at))
            if self.t >= at
        ]


def test_a_fault_on_every_host_settles_only_once_each_hosts_part_is_over(monkeypatch):
    ctx = _TwoHosts(monkeypatch, round_s=1.0, over_at=1.5, h2_at=8.5)
    settle.wait_settled(ctx, poll_s=0.2)
    # h2's replacement is ready at 8.5 (seen by the round ending at 8.8): settled 3 s after that.
    assert ctx.t >= 8.5 + 3.0, ctx.t

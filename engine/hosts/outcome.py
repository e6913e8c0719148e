"""What a step on the hosts came to, whichever way it ran: a playbook (engine/hosts/ansible.py) or
a round trip to the hosts' agents (engine/run/runsteps.py). engine/run/runstatus.py decides a
run's status from it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Failure:
    host: str
    task: str
    message: str
    unreachable: bool = False
    timed_out: bool = False  # the task hit its own bound (a playbook task's `timeout:`, an agent step's)

    def __str__(self) -> str:
        kind = "unreachable" if self.unreachable else "failed"
        return f"{self.host}: {kind} at '{self.task}': {self.message}"


class Outcome:
    """``ok`` and ``summary()`` of a result dataclass with ``status`` (successful, failed, timeout,
    canceled) and ``failures``; ``_what`` names it when no failure does."""

    status: str
    failures: tuple[Failure, ...]

    @property
    def ok(self) -> bool:
        return self.status == "successful"

    def _what(self) -> str:
        return f"the step {self.status}"

    def summary(self) -> str:
        if self.failures:
            return "; ".join(str(f) for f in self.failures)
        return self._what()

"""``failover_broker@T``: on the run's driver host, a client of the broker's replicated set as the
workers are, make the set's replica its master (Redis Sentinel's ``SENTINEL FAILOVER``:
workloads/servers/redis_sentinel.py, bounded): do the workers follow? Only on a broker whose
server can (its ``failover`` capability)."""

from __future__ import annotations

from .base import DRIVER, CellView, FaultKind, Injection


class FailoverBroker(FaultKind):
    name = "failover_broker"
    strikes = DRIVER
    does = (
        "SENTINEL FAILOVER on the run's Redis Sentinel set (broker redis-sentinel): the replica "
        "becomes the master; do the workers follow?"
    )
    cuts_off = True
    #: The capability of the broker's server (workloads/servers/base.py) it needs.
    capability = "failover"

    def check(self, fault, cell: CellView) -> str | None:
        if cell.can(self.capability):
            return None
        able = cell.able(self.capability)
        sets = " or ".join(dict.fromkeys(server.product for server in able.values()))
        return (
            f"fault {fault.text()}: {self.name} fails a {sets} set's master over, which only a "
            f"{' or '.join(able)} broker has (this cell's broker is {cell.values.get('broker')})"
        )

    def inject(self, fault, host: Injection) -> None:
        host.strike()
        host.failover()

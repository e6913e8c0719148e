"""Who a client of a run is and what it talks to (workloads/vocab/clientname.py builds its name from
these), and the message headers cmx stamps (workloads/runtime/instrument.py)."""

from __future__ import annotations

WORKER, DRIVER = "worker", "driver"
BROKER, BACKEND = "broker", "backend"
#: Who opens a connection of the run.
CLIENTS: tuple[str, ...] = (WORKER, DRIVER)
#: What a connection talks to.
TARGETS: tuple[str, ...] = (BROKER, BACKEND)

#: The message headers a publish stamps: when it was sent, and (stream) when it was meant to be.
SENT_HEADER = "cmx_sent_at"
INTENDED_HEADER = "cmx_intended_at"

"""The types a run's queues can have on a broker that has several (RabbitMQ's classic and quorum
queues: the ``queue_type`` dimension). Which server has which types its module says
(workloads/servers/: ``queue_types``); a broker kind that is an alias of one type says so, and the
queue arguments a cell's type asks of its broker come from the kinds' table
(workloads/vocab/kinds.py: ``Kind.queue_type``, ``queue_type_of``, ``queue_type_arguments``)."""

from __future__ import annotations

#: Classic queues carry no ``x-queue-type`` (as before there was a choice); quorum ones say so.
CLASSIC, QUORUM = "classic", "quorum"
QUEUE_TYPES: tuple[str, ...] = (CLASSIC, QUORUM)

"""The registered workloads by name. The engine validates ``workload.params`` against these."""
from __future__ import annotations

from workloads.base import Workload
from workloads.chord_size import ChordSize
from workloads.concurrent_sleep import ConcurrentSleep
from workloads.io_chord import IoChord
from workloads.memory_fanout import MemoryFanout
from workloads.mixed import Mixed
from workloads.sql_fanout import SqlFanout
from workloads.throughput import Throughput

WORKLOADS: dict[str, type[Workload]] = {
    Throughput.name: Throughput,
    MemoryFanout.name: MemoryFanout,
    ConcurrentSleep.name: ConcurrentSleep,
    IoChord.name: IoChord,
    SqlFanout.name: SqlFanout,
    Mixed.name: Mixed,
    ChordSize.name: ChordSize,
}


def names() -> list[str]:
    return sorted(WORKLOADS)


def get(name: str) -> Workload:
    """The workload called ``name``; KeyError if there is none."""
    return WORKLOADS[name]()

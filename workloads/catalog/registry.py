"""The registered workloads by name. The engine validates ``workload.params`` against these.

A name is a built-in (``throughput``…) or the user's own class, ``./my_workload.py:Resize`` (a
file next to the experiment, shipped to the hosts) or ``pkg.mod:Resize`` (importable). User
classes are looked up in the folders :func:`search_in` added (the experiment's, on the
controller) and in the shipped user folder (on hosts).
"""

from __future__ import annotations

from pathlib import Path

from cmx.workloads.catalog import usercode
from cmx.workloads.catalog.base import Workload
from cmx.workloads.catalog.chord_size import ChordSize
from cmx.workloads.catalog.concurrent_sleep import ConcurrentSleep
from cmx.workloads.catalog.io_chord import IoChord
from cmx.workloads.catalog.memory_fanout import MemoryFanout
from cmx.workloads.catalog.mixed import Mixed
from cmx.workloads.catalog.replay import Replay
from cmx.workloads.catalog.sql_fanout import SqlFanout
from cmx.workloads.catalog.throughput import Throughput
from cmx.workloads.catalog.user_tasks import UserTasks

WORKLOADS: dict[str, type[Workload]] = {
    Throughput.name: Throughput,
    MemoryFanout.name: MemoryFanout,
    ConcurrentSleep.name: ConcurrentSleep,
    IoChord.name: IoChord,
    SqlFanout.name: SqlFanout,
    UserTasks.name: UserTasks,
    Mixed.name: Mixed,
    ChordSize.name: ChordSize,
    Replay.name: Replay,
}

_folders: list[Path] = []
_loaded: dict[str, type[Workload]] = {}


def names() -> list[str]:
    return sorted(WORKLOADS)


def is_user_class(name: str) -> bool:
    return ":" in name


def search_in(folder: Path) -> None:
    """Look for user workload classes in ``folder`` too (the experiment's folder)."""
    folder = Path(folder).resolve()
    if folder not in _folders:
        _folders.insert(0, folder)


def load_class(name: str) -> type[Workload]:
    """The user's workload class ``name``; ValueError saying what is wrong with it."""
    if name not in _loaded:
        try:
            cls = usercode.load_object(name, [*_folders, usercode.USER_DIR])
        except Exception as exc:
            raise ValueError(f"cannot load workload {name}: {type(exc).__name__}: {exc}".splitlines()[0]) from None
        if not (isinstance(cls, type) and issubclass(cls, Workload)):
            raise ValueError(f"workload {name} is not a subclass of cmx.workloads.catalog.base.Workload")
        missing = [a for a in ("Params",) if not hasattr(cls, a)] + sorted(getattr(cls, "__abstractmethods__", ()))
        if missing:
            raise ValueError(f"workload {name} does not define {', '.join(missing)}")
        if not isinstance(getattr(cls, "name", None), str):
            cls.name = name  # messages name a workload by it; the reference is what the file says
        _loaded[name] = cls
    return _loaded[name]


def get(name: str) -> Workload:
    """The workload called ``name``; KeyError if there is none."""
    if name in WORKLOADS:
        return WORKLOADS[name]()
    if is_user_class(name):
        try:
            return load_class(name)()
        except ValueError as exc:
            raise KeyError(str(exc)) from None
    raise KeyError(name)

"""What a run's processes and hosts are, for the fingerprint: the client libraries a worker or
driver process has (read in that process: the versions it imports), and the CPU frequency governor.

The packages are the ones whose releases change how Celery moves a message: Celery itself, its
messaging (kombu, amqp, pika), its pool (billiard) and the Redis client. Standard library only:
shipped to every host. The fingerprint as compare and trend read it is cmx.analysis.fingerprint.
"""

from __future__ import annotations

from pathlib import Path

#: The libraries whose versions each worker and driver reports (table ``packages``).
from cmx.workloads.vocab.packages import PACKAGES

GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def versions() -> dict[str, str | None]:
    """``{package: version}`` of :data:`PACKAGES` as this process finds them (None: not installed).
    Called in the worker and the driver themselves, so a host with two environments reports the
    one that ran."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def governor(path: Path = GOVERNOR) -> str:
    """The CPU frequency governor of cpu0 (``performance``, ``powersave``…); ``unknown`` where the
    kernel exposes none (most VMs and containers)."""
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"

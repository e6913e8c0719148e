"""What a nightly sweep's end adds for its history (issue 37: at most 0.5 s), measured in process as
``cmx run`` spends it: ``trend.at_sweep_end`` of the experiment right after the night's runs are
stored, scipy already imported (the sweep's summary bootstrapped its intervals), the nights before
computed by their own sweeps' ends (the statistics cache holds them).

    .venv/bin/python benchmarks/sweep_end.py [--save]

Histories as benchmarks/trend.py fills them (3 ok runs a cell a night, a few % noise, a 20 % step in
one metric), at three sizes: the issue's (12 nights × 1 cell × 40 metrics), a month of a small
matrix (30 × 4 × 40) and a year of a large one (365 × 20 × 10). Each size: the end of the last night
(median, min and max of 5 nights in a row), and the first sweep after an upgrade of cmx (nothing
cached: the whole history computed once, said on the terminal).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import trend as filler  # noqa: E402  (benchmarks/trend.py: the same histories)

from cmx.analysis import stats, trend  # noqa: E402
from cmx.analysis.views import connect  # noqa: E402

TARGET_S = 0.5
SIZES = ((12, 1, 40), (30, 4, 40), (365, 20, 10))
NIGHTS_TIMED = 5


def _end(path: Path) -> float:
    with connect(path, read_only=True) as con:
        began = time.perf_counter()
        assert trend.at_sweep_end(con, "bench", 1) is not None
        return time.perf_counter() - began


def measure(nights: int, cells: int, metrics: int) -> tuple[list[float], float]:
    with tempfile.TemporaryDirectory(prefix="cmx-sweep-end-") as tmp:  # removed after: nothing left behind
        folder = Path(tmp)
        os.environ["CMX_STATS_CACHE"] = str(folder / "stats.duckdb")
        path = folder / "r.duckdb"
        filler.fill(path, nights - NIGHTS_TIMED, cells, metrics, 3)
        upgrade = _end(path)  # nothing cached: as the first sweep after an upgrade
        ends = []
        for night in range(nights - NIGHTS_TIMED, nights):
            filler.add_night(path, night, cells, metrics, 3)
            ends.append(_end(path))
        return ends, upgrade


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", action="store_true", help="also write benchmarks/measured/sweep-end-DATE.txt")
    args = ap.parse_args()
    stats.summarize([1.0, 2.0, 3.0])  # scipy imported, as by the sweep's summary
    lines = [
        f"a sweep's end for its history, in process (target {TARGET_S} s), 5 nights in a row each:",
        f"  {'nights × cells × metrics':<26}{'median s':>9}{'min':>7}{'max':>7}   first after an upgrade",
    ]
    met = True
    for nights, cells, metrics in SIZES:
        ends, upgrade = measure(nights, cells, metrics)
        med = statistics.median(ends)
        met &= med <= TARGET_S
        lines.append(
            f"  {f'{nights} × {cells} × {metrics}':<26}{med:>9.2f}{min(ends):>7.2f}{max(ends):>7.2f}   {upgrade:.1f} s"
        )
    lines.append(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    text = "\n".join(lines)
    print(text)
    if args.save:
        out = REPO / "benchmarks" / "measured" / f"sweep-end-{datetime.date.today()}.txt"
        out.write_text(text + "\n")
        print(f"saved {out.relative_to(REPO)}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Noise measured and shown (issue 37): the same cell run twice on the real Redis and real workers,
once on a quiet host and once beside a process outside the run spinning on a core. The busy
sweep's runs store a clearly higher ``noise_cpu_share``, and ``cmx compare`` of the two says the
noise differs."""

from __future__ import annotations

import json
import os
import warnings
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from cmx.analysis import noise
from cmx.workloads.host.procfs import CLK_TCK, parse_stat
from tests.conftest import cmx, query, write

pytestmark = pytest.mark.integration

#: A spinner bounded on its own too (it is killed once the sweep ends); niced up where allowed, so
#: it keeps its core whatever else the machine runs.
SPIN = (
    "import os, time\ntry:\n    os.nice(-5)\nexcept OSError:\n    pass\n"
    "end = time.monotonic() + 240\nwhile time.monotonic() < end: pass\n"
)


#: The most CPU outside the run the quiet sweep may read for the comparison to mean anything.
QUIET_AT_MOST = 0.25


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("noise")
    exp = write(
        tmp / "noise.yaml",
        """
        name: noise
        repeats: 2
        workload:
          name: throughput
          params: {tasks: 1500, payload_bytes: 64, mode: backlog}
        fixed: {broker: redis, pool: threads, concurrency: 2}
        limits: {run_timeout: 2m}
    """,
    )
    db = tmp / "results" / "cmx.duckdb"
    quiet = cmx("run", str(exp), "--db", str(db), "--tag", "host=quiet", timeout=600)
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        t0, first = time.monotonic(), _ticks(spinner.pid)
        busy = cmx("run", str(exp), "--db", str(db), "--tag", "host=busy", timeout=600)
        # The spinner's CPU over the busy sweep, as a share of the host's cores (what it really got).
        spun = (_ticks(spinner.pid) - first) / CLK_TCK / (time.monotonic() - t0) / os.cpu_count()
    finally:
        spinner.kill()
        spinner.wait()
    return db, quiet, busy, spun


def _ticks(pid: int) -> int:
    return parse_stat(Path(f"/proc/{pid}/stat").read_bytes()).cpu_ticks


def _shares(db, tag: str) -> list[float]:
    return [
        v
        for (v,) in query(
            db,
            """
        SELECT m.value FROM metrics m WHERE m.name = 'noise_cpu_share' AND m.run_id IN (
            SELECT s.run_id FROM run_starts s JOIN sweeps w USING (sweep_id)
            WHERE json_extract_string(w.tags, '$.host') = ?) ORDER BY m.value""",
            [tag],
        )
    ]


def _quiet(calm: list[float]) -> bool:
    """Whether the first sweep had a quiet host: on a machine other work keeps busy (a shared box)
    the spinner cannot add what it would, and the quiet-vs-busy claims are not made; a warning says
    so with the measured share (the measurement itself is still checked against the spinner's CPU)."""
    if max(calm) <= QUIET_AT_MOST:  # every run of it
        return True
    warnings.warn(
        f"the host was busy with other work during the quiet sweep (noise_cpu_share up to "
        f"{max(calm):.2f} > {QUIET_AT_MOST}): the quiet-vs-busy comparison was not made",
        stacklevel=2,
    )
    return False


def test_a_process_outside_the_run_is_measured_as_noise(sweeps):
    db, quiet, busy, spun = sweeps
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert busy.returncode == 0, busy.stdout + busy.stderr
    calm, loud = _shares(db, "quiet"), _shares(db, "busy")
    assert len(calm) == len(loud) == 2, (calm, loud)
    assert all(0 <= v <= 1 for v in calm + loud)
    # Whatever else the machine ran: the spinner's CPU is outside the run (most of it: it spun
    # between the runs too, where the run's processes took no CPU from it).
    assert spun >= 0.05 and min(loud) >= 0.6 * spun, (loud, spun)
    if _quiet(calm):  # one spinning core of two: about half the host's CPU, outside the run
        assert min(loud) >= max(calm) + 0.2 and min(loud) >= 0.4, (calm, loud)
    per_host = query(db, "SELECT count(*), count(DISTINCT run_id) FROM host_noise WHERE name = 'noise_cpu_share'")
    assert per_host == [(4, 4)]
    names = {n for (n,) in query(db, "SELECT DISTINCT name FROM metrics WHERE name LIKE 'noise_%'")}
    assert {"noise_cpu_share", "noise_steal_share", "noise_load1"} <= names, names


def test_compare_says_the_noise_differs(sweeps):
    db = sweeps[0]
    p = cmx("compare", "noise:tag.host=quiet", "noise:tag.host=busy", "--db", str(db), "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    [label] = {r["noise"] for r in rows}
    # compare says what analysis/noise.py's rule says of these runs' stored noise ...
    with duckdb.connect(str(db), read_only=True) as con:
        ids = [
            [
                r
                for (r,) in con.execute(
                    "SELECT s.run_id FROM run_starts s JOIN sweeps w USING (sweep_id) "
                    "WHERE json_extract_string(w.tags, '$.host') = ?",
                    [tag],
                ).fetchall()
            ]
            for tag in ("quiet", "busy")
        ]
        assert label == noise.differs(con, *ids, sides=("in the baseline", "in the contender"))
    assert ("warning: noise differs: " + str(label)) in p.stderr if label else "noise differs" not in p.stderr
    if _quiet(_shares(db, "quiet")):  # ... and on a quiet host that is: the contender's host was busier
        assert label and label.startswith("host ") and "busier in the contender" in label, label

"""apache-otava as the reference of benchmarks/changepoints.py: it does not install beside this
project's numpy/scipy pins, so it runs in a venv of its own (~/.cache/cmx-bench/otava-venv, or
``CMX_OTAVA_VENV``; made on first use: python3 -m venv; pip install apache-otava), fed JSON on stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: Otava's venv: ``CMX_OTAVA_VENV`` when set (e.g. /tmp/otava-venv), else in the user's cache dir.
OTAVA_VENV = Path(
    os.environ.get("CMX_OTAVA_VENV")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cmx-bench" / "otava-venv"
)

OTAVA_SCRIPT = """import json, sys
from otava.analysis import compute_change_points
job = json.load(sys.stdin)
out = []
for series in job["series"]:
    cps, _ = compute_change_points(series, window_len=job["window_len"], max_pvalue=job["max_pvalue"],
                                   min_magnitude=job["min_magnitude"])
    out.append([[int(cp.index), float(cp.stats.forward_change_percent())] for cp in cps])
json.dump(out, sys.stdout)
"""


def otava_python() -> Path:
    """The Otava venv's python, made (python3 -m venv; pip install apache-otava) when missing."""
    py = OTAVA_VENV / "bin" / "python"
    ok = (
        py.exists()
        and not subprocess.run([py, "-c", "import otava.analysis"], capture_output=True, check=False).returncode
    )
    if not ok:
        print(f"making Otava's venv in {OTAVA_VENV} ...", file=sys.stderr)
        subprocess.run(["python3", "-m", "venv", str(OTAVA_VENV)], check=True)
        subprocess.run([py, "-m", "pip", "install", "--quiet", "apache-otava"], check=True)
    return py


def change_points(
    series: list[list[float]], window: int, pvalue: float, magnitude: float
) -> tuple[list[list[tuple[int, float]]], float, str]:
    """Otava's ``compute_change_points`` of each series (one value a point): per series its changes
    (index, forward change %), the seconds Otava took, and its version."""
    py = otava_python()
    job = {"series": series, "window_len": window, "max_pvalue": pvalue, "min_magnitude": magnitude}
    t0 = time.monotonic()
    proc = subprocess.run([py, "-c", OTAVA_SCRIPT], input=json.dumps(job), capture_output=True, text=True, check=False)
    took = time.monotonic() - t0
    if proc.returncode:
        raise RuntimeError(f"otava failed: {proc.stderr.strip()[-2000:]}")
    found = [[(int(i), float(pct)) for i, pct in cps] for cps in json.loads(proc.stdout)]
    version = subprocess.run(
        [py, "-c", "import importlib.metadata as m; print(m.version('apache-otava'))"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return found, took, version

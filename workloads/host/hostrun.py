"""A run's start and end on one host, each as one call (from the host's agent, workloads/host/agent.py,
or ``hostcli begin`` / ``hostcli finish`` by hand).

``begin`` takes one JSON document (spec, secrets, sampler args, whether this host runs the service
and a worker; the agent gets it on its stdin, ``hostcli begin`` on its own), so neither the
secrets nor the spec travel in a command line; ``finish`` stops everything, resets the queues,
records the facts and packs the run dir, and says how long each step took for the engine's stage
seconds.

Secrets: ``begin`` writes them to ``secrets.json`` (mode 0600) in the run dir; every later hostctl
command of the run loads them into its own environment (so the processes it starts inherit them,
never as arguments), and ``finish`` deletes the file before the run dir is packed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cmx.workloads.runtime.files import write_atomic
from cmx.workloads.host import hostctl
from cmx.workloads.vocab.services import is_server_secret

SECRETS = "secrets.json"
#: The environment variables that carry the run's URLs (with passwords) to host processes; each
#: server's own secrets besides them are ``CMX_<SERVICE>_...`` (:func:`is_secret`).
SECRET_VARS = ("CMX_BROKER_URL", "CMX_BACKEND_URL", "CMX_DATABASE_URL")


def is_secret(name: str) -> bool:
    """Whether environment variable ``name`` carries a secret to host processes."""
    return name in SECRET_VARS or is_server_secret(name)


def forget_secrets() -> None:
    """Drop the secrets :func:`load_secrets` put in this process's environment."""
    for name in [n for n in os.environ if is_secret(n)]:
        os.environ.pop(name, None)


def write_secrets(run_dir: Path, secrets: dict[str, str]) -> None:
    """Create the secrets file readable by its owner only (created 0600, never widened)."""
    path = run_dir / SECRETS
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({k: v for k, v in secrets.items() if is_secret(k)}, f)


def load_secrets(run_dir: Path) -> None:
    """Put the run's secrets into this process's environment (nothing when there are none)."""
    try:
        data = json.loads((run_dir / SECRETS).read_text())
    except (OSError, ValueError):
        return
    for k, v in data.items():
        if is_secret(k) and v is not None:
            os.environ[k] = str(v)


def _never() -> bool:
    return False


def begin(run_dir: Path, host: str, payload: dict, cancelled=_never, prepared=None) -> int:
    """Write the spec and secrets, start the sampler, the service and the worker (where they run).
    What fails goes to ``begin.log`` in the run dir, which the run's artifacts bring back (its last
    line is the error the engine shows). ``cancelled`` (the run is being stopped) ends the waits;
    ``prepared()`` is called once the spec and the secrets are in place (the agent starts the
    driver's imports then)."""
    import contextlib
    import traceback

    with open(run_dir / "begin.log", "a") as log, contextlib.redirect_stderr(log):
        try:
            return _begin(run_dir, host, payload, cancelled, prepared)
        except Exception:
            traceback.print_exc()
            return 1


def begin_error(run_dir: Path) -> str:
    """The last line ``begin`` wrote to begin.log: what failed."""
    try:
        lines = [ln.strip() for ln in (run_dir / "begin.log").read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    return lines[-1][:400] if lines else "failed (begin.log is empty)"


def _begin(run_dir: Path, host: str, payload: dict, cancelled=_never, prepared=None) -> int:

    write_atomic(run_dir / "spec.json", json.dumps(payload["spec"], indent=2) + "\n")
    write_secrets(run_dir, payload.get("secrets") or {})
    load_secrets(run_dir)
    # No queue reset here: run ids are unique per execution (engine/plan/planner.py), so the run's
    # queues are new, and finish removes them after the run (workloads/host/leftovers.py).
    args = (payload.get("sampler_args") or "").replace("{run_dir}", str(run_dir))
    hostctl.start_sampler(run_dir, host, shlex.split(args))
    if prepared is not None:
        prepared()
    service = payload.get("service")
    if service and hostctl.start_service(
        run_dir, service["module"], int(service["port"]), float(service.get("ready_timeout", 60)), cancelled
    ):
        return 1
    worker = payload.get("worker")
    if worker and not cancelled():
        return hostctl.start_worker(run_dir, host, float(worker.get("ready_timeout", 60)), cancelled)
    return 1 if cancelled() else 0


def finish(run_dir: Path, host: str, grace: float, reset: bool, clock_port: int | None, keep: bool) -> int:
    """:func:`finish_report` as a command: its report as JSON on stdout, its errors on stderr."""
    report = finish_report(run_dir, host, grace, reset, clock_port, keep)
    for line in report.pop("errors"):
        print(line, file=sys.stderr)
    if report["rc"] == 0:
        print(json.dumps(report))
    return report["rc"]


def finish_report(run_dir: Path, host: str, grace: float, reset: bool, clock_port: int | None, keep: bool) -> dict:
    """Stop the run's processes while, beside them, the facts are recorded (clock offset included);
    then remove what the run left on its broker and backend (``reset``: one host), write the stamps
    as CSV, remove the results of the tasks run here, delete the secrets and pack the run dir into
    ``<run_dir>.tgz``. Each step runs even when another failed, and says so. Returns
    {"rc", "seconds": {step: s}, "failed": [step], "errors": [line], "pack"}."""
    import threading

    from cmx.workloads.runtime.recorder import write_csv

    seconds: dict[str, float] = {}
    failed: list[str] = []
    errors: list[str] = []

    def step(name: str, fn) -> None:
        t0 = time.monotonic()
        try:
            fn()
        except Exception as exc:  # the later steps still matter (no stray process, artifacts)
            failed.append(name)
            errors.append(f"{name} failed on {host}: {type(exc).__name__}: {exc}".splitlines()[0])
        seconds[name] = round(time.monotonic() - t0, 4)

    def collect() -> None:  # needs none of the run's processes: overlaps their shutdown
        step("facts", lambda: hostctl.facts(run_dir, host, clock_port))

    beside = threading.Thread(target=collect, daemon=True)
    beside.start()
    step("stop", lambda: hostctl.stop(run_dir, grace))
    if reset:  # once the workers are gone: a worker shutting down puts its unacked messages back
        step("reset", lambda: hostctl.reset(run_dir))
    beside.join(120)
    if beside.is_alive():
        failed.append("facts")
        errors.append(f"recording the facts on {host} took over 120 s")
    hostctl.reap()
    # The stamps' frames become the CSV files ingest reads, once every writer has stopped.
    step("rows", lambda: write_csv(run_dir))
    if any(run_dir.glob("exec-*.csv")):  # a backend's results of the tasks run here
        step("results", lambda: hostctl.remove_results(run_dir))
    (run_dir / SECRETS).unlink(missing_ok=True)
    shutil.rmtree(run_dir / hostctl.TEMP, ignore_errors=True)  # what the run's processes left there
    t0 = time.monotonic()
    tar = subprocess.run(["tar", "-czf", f"{run_dir}.tgz", "-C", str(run_dir), "."], capture_output=True, text=True)
    seconds["tar"] = round(time.monotonic() - t0, 4)
    if tar.returncode != 0:
        errors.append(f"packing {run_dir} failed: {tar.stderr.strip()}")
        return {"rc": 1, "seconds": seconds, "failed": [*failed, "tar"], "errors": errors, "pack": None}
    if not keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return {"rc": 0, "seconds": seconds, "failed": failed, "errors": errors, "pack": f"{run_dir}.tgz"}


def read_payload() -> dict:
    """``begin``'s JSON document from stdin."""
    return json.loads(sys.stdin.read())

"""A run's start and end on one host, each as one command (one Ansible task instead of six).

``hostctl begin`` reads one JSON document on stdin (spec, secrets, sampler args, whether this host
runs the service and a worker), so neither the secrets nor the spec travel in a command line;
``hostctl finish`` stops everything, resets the queues, records the facts and packs the run dir,
and prints how long each step took (JSON on stdout) for the engine's stage seconds.

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

from cmx.workloads.files import write_atomic

SECRETS = "secrets.json"
#: The environment variables that carry secrets (URLs with passwords) to host processes.
SECRET_VARS = ("CMX_BROKER_URL", "CMX_BACKEND_URL", "CMX_RABBITMQ_API", "CMX_DATABASE_URL")


def write_secrets(run_dir: Path, secrets: dict[str, str]) -> None:
    """Create the secrets file readable by its owner only (created 0600, never widened)."""
    path = run_dir / SECRETS
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({k: v for k, v in secrets.items() if k in SECRET_VARS}, f)


def load_secrets(run_dir: Path) -> None:
    """Put the run's secrets into this process's environment (nothing when there are none)."""
    try:
        data = json.loads((run_dir / SECRETS).read_text())
    except (OSError, ValueError):
        return
    for k, v in data.items():
        if k in SECRET_VARS and v is not None:
            os.environ[k] = str(v)


def begin(run_dir: Path, host: str, payload: dict) -> int:
    """Write the spec and secrets, start the sampler, the service and the worker (where they run).
    Ansible does not log this task (its arguments hold the secrets), so what fails goes to
    ``begin.log`` in the run dir, which the run's artifacts bring back."""
    import contextlib
    import traceback

    with open(run_dir / "begin.log", "a") as log, contextlib.redirect_stderr(log):
        try:
            return _begin(run_dir, host, payload)
        except Exception:
            traceback.print_exc()
            return 1


def _begin(run_dir: Path, host: str, payload: dict) -> int:
    from cmx.workloads.host import hostctl

    write_atomic(run_dir / "spec.json", json.dumps(payload["spec"], indent=2) + "\n")
    write_secrets(run_dir, payload.get("secrets") or {})
    load_secrets(run_dir)
    # No queue reset here: run ids are unique per execution (engine/plan/planner.py), so the run's
    # queues are new, and finish deletes them after the run.
    hostctl.start_sampler(run_dir, host, shlex.split(payload.get("sampler_args") or ""))
    service = payload.get("service")
    if service and hostctl.start_service(run_dir, service["module"], int(service["port"]),
                                         float(service.get("ready_timeout", 60))):
        return 1
    worker = payload.get("worker")
    if worker:
        return hostctl.start_worker(run_dir, host, float(worker.get("ready_timeout", 60)))
    return 0


def finish(run_dir: Path, host: str, grace: float, reset: bool, clock_port: int | None, keep: bool) -> int:
    """Stop, reset (one host), record the facts, delete the secrets, pack the run dir into
    ``<run_dir>.tgz``; each step runs even when an earlier one failed, and says so."""
    from cmx.workloads.host import hostctl

    seconds: dict[str, float] = {}
    failed: list[str] = []

    def step(name: str, fn) -> None:
        t0 = time.monotonic()
        try:
            fn()
        except Exception as exc:  # the later steps still matter (no stray process, artifacts)
            failed.append(name)
            print(f"{name} failed on {host}: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        seconds[name] = round(time.monotonic() - t0, 4)

    step("stop", lambda: hostctl.stop(run_dir, grace))
    if reset:
        step("reset", lambda: hostctl.reset(run_dir))
    step("facts", lambda: hostctl.facts(run_dir, host, clock_port))
    (run_dir / SECRETS).unlink(missing_ok=True)
    t0 = time.monotonic()
    tar = subprocess.run(["tar", "-czf", f"{run_dir}.tgz", "-C", str(run_dir), "."], capture_output=True, text=True)
    seconds["tar"] = round(time.monotonic() - t0, 4)
    if tar.returncode != 0:
        print(f"packing {run_dir} failed: {tar.stderr.strip()}", file=sys.stderr)
        return 1
    if not keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    print(json.dumps({"seconds": seconds, "failed": failed, "pack": f"{run_dir}.tgz"}))
    return 0


def read_payload() -> dict:
    """``begin``'s JSON document from stdin."""
    return json.loads(sys.stdin.read())

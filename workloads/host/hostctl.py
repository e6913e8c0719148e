"""Per-host control of one run: the functions the host's agent (workloads/host/agent.py) and
workloads/host/hostrun.py call; ``python -m cmx.workloads.host.hostcli CMD`` runs each by hand.

Every function works in the run dir (the per-host work dir's ``runs/<run_id>``), tracks what it
starts by pid files there, and is safe to call twice.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from cmx.workloads.runtime.files import write_atomic
from cmx.workloads.runtime.runmarks import STOP_ASKED

#: Every process started here, each the leader of its own session and process group: the agent
#: (workloads/host/agent.py) reaps them and, when its lease ends, stops whole groups.
SPAWNED: list[subprocess.Popen] = []

#: The run dir's folder for temporary files (``TMPDIR`` of every process started here): a prefork
#: worker's pool keeps a ``pymp-*`` folder in it that only a clean exit removes, so a worker a
#: fault kills leaves it in the run's own folder, removed at the run's end, not in the host's /tmp.
TEMP = "tmp"


def _spawn(cmd: list[str], run_dir: Path, log: str, pidfile: str | None, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    """Start ``cmd`` in its own session (out of the agent's and the terminal's process group)."""
    temp = run_dir / TEMP
    temp.mkdir(exist_ok=True)
    with open(run_dir / log, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=run_dir,
            stdin=stdin,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "TMPDIR": str(temp)},
        )
    SPAWNED.append(proc)
    if pidfile:
        write_atomic(run_dir / pidfile, str(proc.pid))
    return proc


def reap() -> None:
    """Collect the exit of every spawned process that ended (no zombie stays behind)."""
    SPAWNED[:] = [p for p in SPAWNED if p.poll() is None]


def _never() -> bool:
    return False


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start_worker(run_dir: Path, host: str, ready_timeout: float, cancelled=_never, queues: str | None = None) -> int:
    """Start the run's worker under its supervisor and wait until it is ready. It consumes the
    hold queue (the driver adds the run's), or ``queues`` (a fault's replacement worker)."""
    from cmx.workloads.vocab.dimensions import worker_argv
    from cmx.workloads.runtime.spec import RunSpec, node_name, python_for

    spec = RunSpec.load(run_dir)
    (run_dir / "worker.ready").unlink(missing_ok=True)
    # The cell's package.* versions: the worker runs in their environment (the supervisor need not).
    cmd = [
        python_for(spec, run_dir),
        "-m",
        "celery",
        "-A",
        "cmx.workloads.app.worker",
        "worker",
        "-n",
        node_name(spec.run_id, host),
        "-Q",
        ",".join((queues or spec.hold_queue, *spec.workload_queues)),
        "-l",
        "WARNING",
        *worker_argv(spec),
    ]  # -P POOL -c N and the worker.* switches, from the dimension registry
    write_atomic(run_dir / "worker.cmd", " ".join(cmd[1:]) + "\n")  # what really ran, for the artifacts
    (run_dir / "worker.exit").unlink(missing_ok=True)
    # The supervisor is the worker's parent: it writes worker.pid, and worker.exit when it ends.
    proc = _spawn(
        [sys.executable, "-m", "cmx.workloads.host.supervisor", str(run_dir), "--", *cmd],
        run_dir,
        "worker.log",
        "supervisor.pid",
    )
    deadline = time.monotonic() + ready_timeout
    while not (run_dir / "worker.ready").exists():
        if proc.poll() is not None:
            from cmx.workloads.host.supervisor import exit_text

            how = exit_text(run_dir) or f"exited ({proc.returncode})"
            print(f"worker on {host} {how} before it was ready: {_tail(run_dir / 'worker.log')}", file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            print(
                f"worker on {host} not ready after {ready_timeout:g}s: {_tail(run_dir / 'worker.log')}", file=sys.stderr
            )
            return 1
        if cancelled():
            print(f"worker on {host}: the run was stopped before the worker was ready", file=sys.stderr)
            return 1
        time.sleep(0.02)
    return 0


def start_service(run_dir: Path, module: str, port: int, ready_timeout: float, cancelled=_never) -> int:
    """Start the workload's service (``python -m MODULE --port PORT``) and wait until it listens."""
    import socket

    proc = _spawn([sys.executable, "-m", module, "--port", str(port)], run_dir, "service.log", "service.pid")
    deadline = time.monotonic() + ready_timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return 0
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline or cancelled():
            print(f"service {module} on port {port} did not start: {_tail(run_dir / 'service.log')}", file=sys.stderr)
            return 1
        time.sleep(0.05)


def start_sampler(run_dir: Path, host: str, sampler_args: list[str]) -> int:
    cmd = [sys.executable, "-m", "cmx.workloads.host.sampler", "--run-dir", str(run_dir), "--host", host, *sampler_args]
    _spawn(cmd, run_dir, "sampler.log", "sampler.pid")
    return 0


def start_driver(run_dir: Path, warm: bool = False) -> subprocess.Popen:
    """Start the driver in its own process group, its output in driver.log; it writes driver.pid
    itself, so ``stop`` can end it even when whoever started it is gone. ``warm``: imported now,
    run when ``go`` is written on its stdin (workloads/host/drivewarm.py). It runs in the
    environment of the cell's package.* versions, as the worker does."""
    from cmx.workloads.runtime.spec import RunSpec, python_for

    module = "cmx.workloads.app.driver"
    python = python_for(RunSpec.load(run_dir), run_dir)
    if warm:
        return _spawn(
            [python, "-m", "cmx.workloads.host.drivewarm", module], run_dir, "driver.log", None, stdin=subprocess.PIPE
        )
    return _spawn([python, "-m", module], run_dir, "driver.log", None)


def drive(run_dir: Path) -> int:
    """Run the driver until it ends; its exit code."""
    return start_driver(run_dir).wait()


def reset(run_dir: Path) -> int:
    """Remove what the run created on its broker and backend: its queues with their messages,
    exchanges, bindings and results (workloads/host/leftovers.py). After the run, whatever its end."""
    from cmx.workloads.app.factory import rpc_replies
    from cmx.workloads.host.leftovers import remove_run
    from cmx.workloads.runtime.spec import RunSpec

    remove_run(RunSpec.load(run_dir), replies=rpc_replies(run_dir))
    return 0


def remove_results(run_dir: Path) -> int:
    """Remove the results of the tasks this host's workers ran (their ids from its ``exec-*.csv``):
    what a backend without the run's names in its keys keeps (workloads/host/leftovers.py)."""
    import csv

    from cmx.workloads.host.leftovers import remove_run
    from cmx.workloads.runtime.spec import RunSpec

    ids: set[str] = set()
    for path in run_dir.glob("exec-*.csv"):
        with open(path, newline="") as f:
            ids.update(row["task_id"] for row in csv.DictReader(f) if row.get("task_id"))
    if ids:
        remove_run(RunSpec.load(run_dir), tuple(sorted(ids)))
    return 0


def _gone(p: psutil.Process) -> bool:
    """A process that exited counts as gone even while it is a zombie: whoever started it (a
    ``hostctl start-*`` that returned, so PID 1 by now) reaps it in its own time, and waiting
    for that is what made stopping slow."""
    try:
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(procs: list[psutil.Process], timeout: float, seen: dict | None = None) -> list[psutil.Process]:
    """Poll until every process is gone (zombies included) or ``timeout`` s passed; the rest.
    ``seen`` gets, for each process, how many seconds it took to go."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    alive = procs
    while True:
        still = [p for p in alive if not _gone(p)]
        if seen is not None:
            seen.update({p.pid: round(time.monotonic() - t0, 3) for p in alive if p not in still})
        alive = still
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.02)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):  # absent (never started, or a sampler that left cleanly), half-written
        return None


def _stop_trees(pids: list[int], grace: float, also: list[int] = (), seen: dict | None = None) -> list[int]:
    """TERM the given processes together (Celery's warm shutdown stops its own pool), wait up to
    ``grace`` s for them, their descendants and ``also`` (processes that end on their own once the
    others did, such as the worker's supervisor), then KILL whatever is left, whole process groups;
    ``also`` a moment later, so that the supervisor still records how its worker ended."""
    procs, after = [], []
    for pid in [*pids, *also]:
        try:
            root = psutil.Process(pid)
            procs += [root, *root.children(recursive=True)]
            if pid in pids:
                root.send_signal(signal.SIGTERM)
            else:
                after.append(root)
        except psutil.NoSuchProcess:
            pass
    alive = _wait_gone(procs, grace, seen)
    if alive:
        _kill([p for p in alive if p not in after])
        _kill(_wait_gone(alive, 0.5))
        _wait_gone(alive, 5)
    return [p.pid for p in procs]


def _kill(procs: list[psutil.Process]) -> None:
    """KILL the processes and the process groups they lead."""
    for p in procs:
        try:
            leader = os.getpgid(p.pid) == p.pid
            p.kill()
            if leader:
                os.killpg(p.pid, signal.SIGKILL)
        except (psutil.NoSuchProcess, ProcessLookupError, PermissionError):
            pass


def stop(run_dir: Path, grace: float) -> int:
    """Stop the run's processes, all together: workers, services, driver and sampler (each in its
    own process group), and every descendant; nothing started for the run survives, and a process
    that exited counts as gone even before it is reaped. ``grace`` bounds the warm shutdown: the
    engine gives a short one after a drive that finished (a drained worker has nothing left to
    finish: every row it recorded is on disk within the recorder's flush interval) and a long one
    otherwise."""
    t0, t_wall = time.monotonic(), time.time()
    write_atomic(run_dir / STOP_ASKED, f"{t_wall!r}\n")  # the harness's stop, not a fault's TERM
    pids = [_read_pid(run_dir / name) for name in ("worker.pid", "service.pid", "driver.pid", "sampler.pid")]
    supervisor = _read_pid(run_dir / "supervisor.pid")
    gone_after: dict[int, float] = {}
    stopped = _stop_trees([p for p in pids if p], grace, [supervisor] if supervisor else [], gone_after)
    write_atomic(
        run_dir / "stop.json",
        json.dumps(
            {"stopped_pids": stopped, "seconds": time.monotonic() - t0, "at": t_wall, "gone_after_s": gone_after}
        ),
    )
    return 0


def facts(run_dir: Path, host: str, clock_port: int | None = None) -> int:
    from importlib.metadata import PackageNotFoundError, version

    from cmx.workloads.runtime.fingerprint import governor

    def ver(dist: str) -> str | None:
        try:
            return version(dist)
        except PackageNotFoundError:
            return None

    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    data = {
        "host": host,
        "cpu_model": cpu_model or platform.processor(),
        "cores": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "celery": ver("celery"),
        "kombu": ver("kombu"),
        "hostname": platform.node(),
        "time": time.time(),
        "governor": governor(),
        "clock_offset_s": None,
        "clock_uncertainty_s": None,
        "clock_method": "not measured",
    }
    if clock_port:
        from cmx.workloads.runtime.clock import controller_address, measure

        offset, uncertainty, how = measure(controller_address(), clock_port)
        data.update(clock_offset_s=offset, clock_uncertainty_s=uncertainty, clock_method=how)
    write_atomic(run_dir / "facts.json", json.dumps(data, indent=2))
    return 0


def end_group(proc, grace: float) -> None:
    """TERM the process group ``proc`` leads, KILL it after ``grace`` s; reap ``proc``."""
    if proc.stdin is not None:  # a warm driver leaves on its own when its stdin ends
        try:
            proc.stdin.close()
        except OSError:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(grace)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # members of the group that outlived its leader
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

"""Running our playbooks through ansible-runner, with secrets kept off disk and failures named."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cmx.engine.hosts.outcome import Failure, Outcome
from cmx.engine.paths import PLAYBOOKS, ROLES

#: Ansible's own ssh_args plus keepalives: a host that drops off the network mid-run (its
#: link down, powered off) ends its persistent SSH connection within 15 s, so the next task on
#: it fails as unreachable instead of hanging on the dead connection until the playbook's
#: timeout (tests/faults/test_ssh_dropped.py). ANSIBLE_SSH_ARGS in the environment wins.
#: Hosts a playbook sets up at once: every host it names (``forks``), within these bounds.
MIN_FORKS, MAX_FORKS = 20, 200
SSH_ARGS = "-C -o ControlMaster=auto -o ControlPersist=60s -o ServerAliveInterval=5 -o ServerAliveCountMax=3"


@dataclass(frozen=True)
class PlaybookResult(Outcome):
    status: str  # ansible-runner's: successful, failed, timeout, canceled
    rc: int
    failures: tuple[Failure, ...]
    seconds: float
    #: "host: role: task" of every task that reported a change (an idempotent re-run has none).
    changed: tuple[str, ...] = ()
    #: ansible-runner's count of changed tasks per host (the PLAY RECAP's changed=N).
    changed_per_host: tuple[tuple[str, int], ...] = ()

    def _what(self) -> str:
        return f"ansible-playbook {self.status} (rc={self.rc})"


def _one_line(text: str, limit: int = 400) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    # The last lines of stderr say what went wrong; the first of msg usually does.
    line = lines[-1] if lines else ""
    return line[:limit]


def _failure(event: dict) -> Failure:
    data = event.get("event_data", {})
    res = data.get("res", {}) or {}
    msg = res.get("stderr") or res.get("msg") or res.get("stdout") or "no message"
    if "censored" in res:  # a no_log task: its arguments held secrets, so does its output
        msg = "failed; not logged as its arguments hold secrets"
    return Failure(
        host=data.get("host", "?"),
        task=data.get("task", "?"),
        message=_one_line(msg),
        unreachable=event.get("event") == "runner_on_unreachable",
        timed_out=bool(res.get("timedout")),
    )


def run_playbook(
    name: str,
    inventory: Path,
    private_dir: Path,
    extravars: dict[str, Any],
    secrets: dict[str, str],
    timeout: float | None = None,
    cancel: Callable[[], bool] | None = None,
    forks: int = 0,
) -> PlaybookResult:
    """Run ``engine/hosts/playbooks/<name>`` against ``inventory``. ``secrets`` reach the playbook as
    environment variables only. ansible-runner writes that environment (``artifacts/*/command``)
    and the job events to its private data dir, so that dir is a private temporary one (0700),
    removed when the call returns or raises, and by the next call when a crash left it behind;
    only the playbook's stdout is kept, in ``private_dir``. ``forks``: how many hosts the play
    works on at once (the hosts it names: all together), at least :data:`MIN_FORKS`."""
    import time

    import ansible_runner

    private_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_private_dirs()
    bin_dir = str(Path(sys.executable).parent)  # ansible-playbook must be the one beside us
    envvars = {
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_ROLES_PATH": str(ROLES),
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_FORKS": str(min(max(forks, MIN_FORKS), MAX_FORKS)),
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_SSH_ARGS": os.environ.get("ANSIBLE_SSH_ARGS") or SSH_ARGS,
        **secrets,
    }
    failures: list[Failure] = []
    changed: list[str] = []
    stats: dict = {}  # from the playbook_on_stats event (nothing of the run is kept on disk)
    start = time.monotonic()

    def on_event(event: dict) -> bool:
        kind, data = event.get("event"), event.get("event_data", {})
        if kind == "runner_on_ok":
            if _reports_change(event):
                changed.append(f"{data.get('host', '?')}: {data.get('role') or '-'}: {data.get('task', '?')}")
        elif kind in ("runner_on_failed", "runner_on_unreachable"):
            if not data.get("ignore_errors"):
                failures.append(_failure(event))
        elif kind == "playbook_on_stats":
            stats.update(data)
        return False  # nothing to disk: the events may hold what the tasks printed

    tmp = Path(tempfile.mkdtemp(prefix=PRIVATE_PREFIX))
    (tmp / "owner.pid").write_text(str(os.getpid()))
    try:
        r = ansible_runner.run(
            private_data_dir=str(tmp),
            playbook=str(PLAYBOOKS / name),
            inventory=str(inventory.resolve()),
            extravars=extravars,
            envvars=envvars,
            suppress_env_files=True,
            quiet=True,
            timeout=int(timeout) if timeout else None,
            cancel_callback=cancel or (lambda: False),
            event_handler=on_event,
            rotate_artifacts=0,
            ident=name.removesuffix(".yml"),
        )
        out = tmp / "artifacts" / name.removesuffix(".yml") / "stdout"
        if out.exists():
            try:
                shutil.copyfile(out, private_dir / "stdout")
            except OSError:  # a full results disk: the run's own records say so; this copy is an aid
                (private_dir / "stdout").unlink(missing_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return PlaybookResult(
        status=r.status,
        rc=r.rc if r.rc is not None else -1,
        failures=tuple(failures),
        seconds=time.monotonic() - start,
        changed=tuple(changed),
        changed_per_host=_changed_per_host(stats),
    )


def _reports_change(event: dict) -> bool:
    res = event.get("event_data", {}).get("res") or {}
    if "changed" in res:
        return bool(res["changed"])
    # A no_log task's result is censored down to a message; its display line still says it.
    return str(event.get("stdout", "")).lstrip().startswith("changed:")


def _changed_per_host(stats: dict) -> tuple[tuple[str, int], ...]:
    """(host, changed tasks) for every host in ansible-runner's stats; it omits the zero counts."""
    hosts = {h for key in ("ok", "changed", "failures", "dark", "skipped") for h in (stats.get(key) or {})}
    return tuple((h, int((stats.get("changed") or {}).get(h, 0))) for h in sorted(hosts))


PRIVATE_PREFIX = "cmx-ansible-"


def remove_stale_private_dirs() -> None:
    """Remove private data dirs whose cmx process is gone (killed before its ``finally`` ran)."""
    import time

    for d in Path(tempfile.gettempdir()).glob(PRIVATE_PREFIX + "*"):
        try:
            pid = int((d / "owner.pid").read_text())
        except (OSError, ValueError):  # being created right now, or very old
            try:
                if time.time() - d.stat().st_mtime < 60:
                    continue
            except OSError:
                continue
        else:
            try:
                os.kill(pid, 0)
                continue  # its owner is alive
            except PermissionError:
                continue  # alive, someone else's
            except OSError:
                pass
        shutil.rmtree(d, ignore_errors=True)

"""No secret in any process's command line during a sweep, nor in any file it leaves behind.

The local PostgreSQL trusts loopback, so a backend URL with a made-up password works and the
password is a string nothing else on this machine contains: a scanner reads every process's
command line while the sweep runs, then every file under the results dir, the host's work dir
and the temporary dirs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import pytest

from tests.conftest import CMX, REPO, local_inventory, query, write

pytestmark = pytest.mark.integration

PASSWORD = "cmxSecret" + "Zq81x"  # never written whole in this file's text at rest


def _inventory(path: Path, workdir: Path) -> Path:
    return local_inventory(
        path,
        workdir,
        brokers={"broker_url": "redis://127.0.0.1:6379/0"},
        backends={"backend_url": f"postgresql://postgres:{PASSWORD}@127.0.0.1:5432/postgres"},
    )


def _files_holding(root: Path, needle: bytes) -> list[str]:
    found = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            try:
                if needle in path.read_bytes():
                    found.append(str(path))
            except OSError:
                pass
    return found


def test_no_secret_in_command_lines_or_leftover_files(tmp_path):
    workdir = tmp_path / "hostwork"
    inv = _inventory(tmp_path / "inv.yml", workdir)
    exp = write(
        tmp_path / "exp.yaml",
        """
        name: secrets-scan
        workload: {name: throughput, params: {tasks: 200, mode: backlog}}
        fixed: {broker: redis, backend: postgres, pool: threads, concurrency: 2}
        repeats: 2
        limits: {run_timeout: 2m}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    seen: list[str] = []
    scans = 0
    done = threading.Event()

    def scan() -> None:
        nonlocal scans
        while not done.is_set():
            for p in psutil.process_iter(["cmdline"]):
                line = " ".join(p.info["cmdline"] or [])
                if PASSWORD in line:
                    seen.append(line[:300])
            scans += 1

    scanner = threading.Thread(target=scan, daemon=True)
    scanner.start()
    try:
        proc = subprocess.run(
            [*CMX, "run", str(exp), "--inventory", str(inv), "--db", str(db)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    finally:
        done.set()
        scanner.join(10)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert query(db, "SELECT count(*) FROM runs WHERE status = 'ok'") == [(2,)]
    assert scans > 20  # the scanner really ran through the sweep
    assert seen == [], "the password was in a command line: " + seen[0]
    assert PASSWORD not in proc.stdout + proc.stderr
    needle = PASSWORD.encode()
    leftovers = _files_holding(tmp_path / "results", needle) + _files_holding(workdir, needle)
    leftovers += [
        d for d in map(str, Path(tempfile.gettempdir()).glob("cmx-ansible-*")) if _files_holding(Path(d), needle)
    ]
    assert leftovers == []


def test_hostctl_secrets_file_is_private_and_removed_by_finish(tmp_path):
    """begin writes the secrets 0600 for the run's later commands; finish deletes them before
    packing, so they are in no artifact."""
    from cmx.workloads.host import hostrun

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    hostrun.write_secrets(run_dir, {"CMX_BROKER_URL": f"redis://:{PASSWORD}@h:6379/0", "OTHER": "x"})
    path = run_dir / hostrun.SECRETS
    assert path.stat().st_mode & 0o777 == 0o600
    env = {k: v for k, v in os.environ.items() if not hostrun.is_secret(k)}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; from pathlib import Path; "
            "from cmx.workloads.host import hostrun; hostrun.load_secrets(Path(sys.argv[1])); "
            "print(os.environ.get('CMX_BROKER_URL'), os.environ.get('OTHER'))",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO)},
        check=True,
    )
    assert out.stdout.split() == [f"redis://:{PASSWORD}@h:6379/0", "None"]
    rc = hostrun.finish(run_dir, "h", grace=1.0, reset=False, clock_port=None, keep=False)
    assert rc == 0
    assert not run_dir.exists()
    listing = subprocess.run(["tar", "-tzf", f"{run_dir}.tgz"], capture_output=True, text=True, check=True).stdout
    assert hostrun.SECRETS not in listing and "facts.json" in listing
    assert PASSWORD.encode() not in subprocess.run(["tar", "-xzOf", f"{run_dir}.tgz"], capture_output=True).stdout

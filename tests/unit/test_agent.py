"""The host agent's protocol and its lease, with a real agent process on this machine (no broker:
the run it begins has only a sampler, which is enough to see that the agent stops what it
started)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO


def _agent(workdir: Path, lease: float = 20.0) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cmx.workloads.host.agent",
            "--host",
            "h",
            "--workdir",
            str(workdir),
            "--lease",
            str(lease),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    hello = json.loads(proc.stdout.readline())
    assert hello["hello"] and hello["host"] == "h" and hello["pid"] == proc.pid
    return proc


def _ask(proc: subprocess.Popen, **msg) -> dict:
    proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def _begin_sampler(proc, workdir: Path, run_id: str) -> psutil.Process:
    reply = _ask(
        proc,
        id=1,
        cmd="begin",
        run_id=run_id,
        payload={
            "spec": {"run_id": run_id},
            "secrets": {"CMX_BROKER_URL": "redis://:pw@x:1/0"},
            "sampler_args": "--watch worker={run_dir}/worker.pid",
        },
    )
    assert reply == {"id": 1, "ok": True, "rc": 0, "error": None}
    run_dir = workdir / "runs" / run_id
    assert (run_dir / "secrets.json").stat().st_mode & 0o777 == 0o600
    pid = int((run_dir / "sampler.pid").read_text())
    sampler = psutil.Process(pid)
    deadline = time.monotonic() + 10  # a loaded machine may show the new process before its argv
    while not sampler.cmdline() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert f"worker={run_dir}/worker.pid" in " ".join(sampler.cmdline())  # the host's own run dir
    return sampler


def _gone(p: psutil.Process, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_ping_and_a_finish_that_leaves_its_pack_on_the_host(tmp_path):
    """On this machine the controller moves the pack itself: the finish sends no bytes and the pack
    stays where the report says (over SSH it follows the answer: the test below)."""
    proc = _agent(tmp_path)
    try:
        assert _ask(proc, id=7, cmd="ping") == {"id": 7, "ok": True, "pid": proc.pid}
        sampler = _begin_sampler(proc, tmp_path, "r1")
        report = _ask(proc, id=2, cmd="finish", run_id="r1", grace=2, reset=False, keep=False)
        assert report["ok"] and report["rc"] == 0 and report["failed"] == [], report
        assert set(report["seconds"]) >= {"stop", "facts", "tar"}
        assert _gone(sampler, 1)  # finish returned: the host is quiet
        pack = tmp_path / "runs" / "r1.tgz"
        assert "bytes" not in report and report["pack"] == str(pack)
        assert _ask(proc, id=4, cmd="ping")["ok"]
        with tarfile.open(pack) as tar:
            names = tar.getnames()
        assert "./facts.json" in names and "./secrets.json" not in names
        assert _ask(proc, id=5, cmd="nonsense")["ok"] is False
        assert _ask(proc, id=6, cmd="quit") == {"id": 6, "ok": True}
        assert proc.wait(10) == 0
    finally:
        proc.kill()


def test_a_finish_asked_to_send_its_pack_sends_it_with_the_answer(tmp_path):
    """Over SSH the pack comes back in the finish's own answer: one round trip a run, not two;
    nothing of the run stays on the host once the bytes went out (unless kept)."""
    proc = _agent(tmp_path)
    try:
        _begin_sampler(proc, tmp_path, "r3")
        proc.stdin.write(
            b'{"id": 2, "cmd": "finish", "run_id": "r3", "grace": 2, "reset": false, '
            b'"keep": false, "send_pack": true}\n'
        )
        proc.stdin.flush()
        report = json.loads(proc.stdout.readline())
        assert report["ok"] and report["rc"] == 0 and report["bytes"] > 0, report
        assert "_pack" not in report and "_unlink" not in report
        data = proc.stdout.read(report["bytes"])
        assert _ask(proc, id=4, cmd="ping")["ok"]  # the stream goes on after the bytes
        out = tmp_path / "got.tgz"
        out.write_bytes(data)
        with tarfile.open(out) as tar:
            names = tar.getnames()
        assert "./facts.json" in names and "./secrets.json" not in names
        deadline = time.monotonic() + 5
        while (tmp_path / "runs" / "r3.tgz").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not (tmp_path / "runs" / "r3.tgz").exists() and not (tmp_path / "runs" / "r3").exists()
        assert _ask(proc, id=6, cmd="quit") == {"id": 6, "ok": True}
        assert proc.wait(10) == 0
    finally:
        proc.kill()


@pytest.mark.parametrize("how", ["stdin ends", "lease runs out"])
def test_the_agent_stops_what_it_started_and_exits(tmp_path, how):
    proc = _agent(tmp_path, lease=2.0)
    try:
        sampler = _begin_sampler(proc, tmp_path, "r2")
        t0 = time.monotonic()
        if how == "stdin ends":
            proc.stdin.close()
        else:  # silent, but connected: the lease (2 s) runs out
            time.sleep(1.0)
            assert proc.poll() is None and not _gone(sampler, 0.1)
        assert proc.wait(2.0 + 5) == 0
        assert _gone(sampler, 1), "the agent exited but left its sampler running"
        assert time.monotonic() - t0 < (2 if how == "stdin ends" else 2.0 + 5)
        assert not (tmp_path / "runs" / "r2" / "secrets.json").exists()  # no secret left behind
        assert b"stopped" in proc.stderr.read()
    finally:
        proc.kill()

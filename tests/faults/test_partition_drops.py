"""partition_worker drops packets (issue 39 point 3), on network-namespace hosts (tests/nethosts.py):
h1 listens as the broker would, h2 is the worker host whose traffic to it is cut.

- During the partition (nftables: ``table inet cmx_partition`` in h2's own namespace, the run's id
  in its comments) a TCP connect from h2 to h1's port hangs until its bounded wait ends, it is
  not refused; after the partition it connects again, and the table is gone.
- The process holding the partition SIGKILLed mid-partition (as an agent's fault thread whose
  controller vanished): the table stays until the lease end's ``heal`` of the run dir removes it.
- The blackhole route (the fallback where no packet filter exists) fails a connect at once: it is
  not what a partition does, which is why the filter comes first.
- Neither this machine's own ruleset nor h1's ever holds the table.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.nethosts import NetHosts, missing
from tests.prereqs import require

pytestmark = [pytest.mark.integration]
PORT = 16379

_LISTEN = textwrap.dedent("""
    import socket, sys, time
    s = socket.create_server((sys.argv[1], int(sys.argv[2])))
    while True:
        c, _ = s.accept(); c.close()
""")
# In the worker host's namespace: hold a partition of the run dir argv[1] to argv[2] for argv[3] s,
# as the agent's fault thread does (SSH_CONNECTION: the controller's address, the bridge's).
_HOLD = textwrap.dedent("""
    import sys, pathlib
    from cmx.workloads.host import faultinject
    print(faultinject.partition(pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), lambda: False), flush=True)
""")
_CONNECT = textwrap.dedent("""
    import json, socket, sys, time
    t0 = time.monotonic()
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
        what = "connected"
    except socket.timeout:
        what = "timeout"
    except OSError as exc:
        what = type(exc).__name__ + ": " + str(exc)
    print(json.dumps([what, time.monotonic() - t0]))
""")


def _in(ns: str, *cmd: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True, timeout=60, **kw)


def _connect(ns: str, address: str, wait_s: float) -> tuple[str, float]:
    done = _in(ns, sys.executable, "-c", _CONNECT, address, str(PORT), str(wait_s))
    what, took = json.loads(done.stdout)
    return what, took


def _table(ns: str | None) -> str:
    cmd = ["nft", "list", "ruleset"]
    out = (_in(ns, *cmd) if ns else subprocess.run(cmd, capture_output=True, text=True)).stdout
    return out if "cmx_partition" in out else ""


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_partition_drops_packets_and_is_always_undone(tmp_path):
    require(missing())
    if not Path("/usr/sbin/nft").exists():
        require("needs nftables (nft): .ci/test-deps installs it")
    mine = _table(None)
    with NetHosts(tmp_path / "net", 2) as net:
        h1, h2 = net.hosts
        env = {**os.environ, "SSH_CONNECTION": f"{net.subnet}.1 40000 {h2.address} 22"}
        listener = subprocess.Popen(
            ["ip", "netns", "exec", h1.ns, sys.executable, "-c", _LISTEN, h1.address, str(PORT)]
        )
        try:
            assert _wait(lambda: _connect(h2.ns, h1.address, 2)[0] == "connected", 20)
            url = f"redis://{h1.address}:{PORT}/0"

            run_dir = tmp_path / "runs" / "run-part-1"
            run_dir.mkdir(parents=True)
            hold = subprocess.Popen(
                ["ip", "netns", "exec", h2.ns, sys.executable, "-c", _HOLD, str(run_dir), url, "6"],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert _wait(lambda: _table(h2.ns), 20), "no partition table appeared in h2's namespace"
            table = _table(h2.ns)
            assert "table inet cmx_partition" in table and "run-part-1" in table and str(PORT) in table, table
            what, took = _connect(h2.ns, h1.address, 2.0)
            assert what == "timeout" and took >= 1.9, (what, took)  # hangs, not refused
            out, _ = hold.communicate(timeout=30)
            assert hold.returncode == 0 and "nftables" in out, out
            assert _table(h2.ns) == "" and not (run_dir / "partition.json").exists()
            assert _connect(h2.ns, h1.address, 2)[0] == "connected"

            # the fault's process killed mid-partition: what the lease end does (heal the run dir) undoes it
            run_dir = tmp_path / "runs" / "run-part-2"
            run_dir.mkdir(parents=True)
            hold = subprocess.Popen(
                ["ip", "netns", "exec", h2.ns, sys.executable, "-c", _HOLD, str(run_dir), url, "120"],
                env=env,
                start_new_session=True,
            )
            assert _wait(lambda: _table(h2.ns), 20)
            os.killpg(hold.pid, signal.SIGKILL)
            hold.wait(timeout=10)
            assert _table(h2.ns), "the table went with the process: nothing left for the lease end to prove"
            assert _connect(h2.ns, h1.address, 1.0)[0] == "timeout"
            healed = _in(
                h2.ns,
                sys.executable,
                "-c",
                "import sys, pathlib; from cmx.workloads.host import "
                "faultinject; faultinject.heal(pathlib.Path(sys.argv[1]))",
                str(run_dir),
            )
            assert healed.returncode == 0, healed.stderr
            assert _table(h2.ns) == "" and _connect(h2.ns, h1.address, 2)[0] == "connected"

            # iptables, where only it exists: its own chain drops the packets the same way, and goes whole
            if shutil.which("iptables"):
                cut = _in(
                    h2.ns,
                    sys.executable,
                    "-c",
                    "import sys; from cmx.workloads.host import netcut; "
                    "netcut.cut(sys.argv[1], int(sys.argv[2]), 'run-part-3', 'iptables')",
                    h1.address,
                    str(PORT),
                )
                assert cut.returncode == 0, cut.stderr
                chain = _in(h2.ns, "iptables", "-S").stdout
                assert "-N cmx_partition" in chain and "run-part-3" in chain and str(PORT) in chain, chain
                what, took = _connect(h2.ns, h1.address, 2.0)
                assert what == "timeout" and took >= 1.9, (what, took)  # hangs, not refused
                _in(
                    h2.ns,
                    sys.executable,
                    "-c",
                    "import sys; from cmx.workloads.host import netcut; netcut.undo(sys.argv[1], 'iptables')",
                    h1.address,
                )
                assert "cmx_partition" not in _in(h2.ns, "iptables", "-S").stdout
                assert _connect(h2.ns, h1.address, 2)[0] == "connected"
            else:
                require("needs iptables: .ci/test-deps installs it")

            # the fallback: a blackhole route fails at once instead of hanging
            route = _in(
                h2.ns,
                sys.executable,
                "-c",
                "import sys; from cmx.workloads.host import netcut; netcut.cut(sys.argv[1], 1, 'r', 'route')",
                h1.address,
            )
            assert route.returncode == 0, route.stderr
            what, took = _connect(h2.ns, h1.address, 2.0)
            assert what != "timeout" and took < 1.0, (what, took)
            _in(
                h2.ns,
                sys.executable,
                "-c",
                "import sys; from cmx.workloads.host import netcut; netcut.undo(sys.argv[1], 'route')",
                h1.address,
            )
            assert _connect(h2.ns, h1.address, 2)[0] == "connected"
            assert _table(h1.ns) == ""
        finally:
            listener.kill()
            listener.wait()
    assert _table(None) == mine  # this machine's own ruleset untouched

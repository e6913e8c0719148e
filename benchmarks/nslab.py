"""Run a cmx command against hosts of our own: network namespaces reached over real SSH
(tests/nethosts.py), made for the command and gone after it. Needs root, iproute2 and sshd
(`bash .ci/test-deps`). The hosts' work dirs are seeded with a provisioned venv (tests/hostseed.py:
the namespaces reach no package index).

    python benchmarks/nslab.py --hosts 3 --brokers h1,h2,h3 --workers h2 --drivers h3 -- \\
        cmx run experiments/faults/node-loss.yaml --db /tmp/nodeloss-ssh.duckdb

``--inventory <the lab's>`` is appended to the command; the inventory is printed first. Each
brokers host's cluster files (broker rabbitmq-cluster) go under the dir the lab removes at its end;
the lab's own folder (the hosts' work dirs) is removed too: the lab leaves nothing behind.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.nethosts import NetHosts, missing  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=3, help="how many hosts h1..hN (default 3)")
    for group, default in (("brokers", "h1,h2,h3"), ("workers", "h2"), ("drivers", "h3"), ("backends", "")):
        ap.add_argument(f"--{group}", default=default, help=f"hosts of group {group} (default {default or 'none'})")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the cmx command")
    args = ap.parse_args()
    command = [c for c in args.command if c != "--"]
    if not command:
        print("error: no command given (after --)", file=sys.stderr)
        return 2
    if why := missing():
        print(f"error: network-namespace hosts cannot be made here: {why}", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="cmx-nslab-"))
    try:
        return _run(root, args, command)
    finally:
        # The hosts' seeded venvs and work dirs (~1.2 GB of hard links and copies) go with the lab.
        shutil.rmtree(root, ignore_errors=True)


def _run(root: Path, args: argparse.Namespace, command: list[str]) -> int:
    with NetHosts(root / "net", args.hosts) as net:
        groups = {
            g: [h for h in getattr(args, g).split(",") if h] for g in ("brokers", "workers", "drivers", "backends")
        }
        hostvars = {
            h.name: {"rabbitmq_cluster_base_dir": f"/var/lib/cmx-rabbitmq/test{net.tag}-{h.name}/cluster"}
            for h in net.hosts
        }
        inv = net.inventory(
            root / "lab.yml",
            {g: hs for g, hs in groups.items() if hs},
            workdir_root=root / "hosts",
            seeded=True,
            hostvars=hostvars,
        )
        layout = ", ".join(
            f"{h.name} {h.address} ({', '.join(g for g, hs in groups.items() if h.name in hs) or '-'})"
            for h in net.hosts
        )
        print(f"# hosts: {layout}; bridge {net.bridge}; inventory {inv}", flush=True)
        return subprocess.run(command + ["--inventory", str(inv)], timeout=4 * 3600).returncode


if __name__ == "__main__":
    sys.exit(main())

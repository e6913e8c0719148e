"""A partition's cut on this host (partition_worker: workloads/faults/partition_worker.py): the traffic
between this host and the broker's address and port dropped both ways, silently, as a real
network partition does (a connection hangs until a heartbeat or keepalive notices), and undone.

Methods, the first this host has: ``nftables`` (``table inet cmx_partition``, the run's id in
its rules' comments, deleted whole), ``iptables`` (chain ``cmx_partition`` jumped to from INPUT
and OUTPUT, flushed and deleted), else ``route`` (a blackhole route to the address: the host's
sends fail at once, ``EINVAL``, instead of hanging). The one used is returned and recorded
(faults.csv ``method``) so that :func:`undo` removes exactly it. Only this host's own network
namespace changes, and only for packets to or from the broker's address and port.
"""

from __future__ import annotations

import shutil
import subprocess

NAME = "cmx_partition"  # the nftables table / iptables chain: cmx's own, nothing else's
METHODS = ("nftables", "iptables", "route")


class CutFailed(Exception):
    """The cut (or its undoing) could not be done; the message says why."""


def _run(*cmd: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=10)


def _must(*cmd: str, stdin: str | None = None) -> None:
    done = _run(*cmd, stdin=stdin)
    if done.returncode:
        raise CutFailed(f"{' '.join(cmd)} failed: {(done.stderr or done.stdout).strip()[:200]}")


def method() -> str:
    """The method this host has: nftables, iptables (only where nft is missing), else route."""
    if shutil.which("nft"):
        return "nftables"
    if shutil.which("iptables"):
        return "iptables"
    return "route"


def _nft_ruleset(address: str, port: int, run_id: str) -> str:
    note = f'comment "cmx partition of run {run_id}"'
    return (
        f"table inet {NAME} {{\n"
        f"  chain out {{ type filter hook output priority -10; policy accept;\n"
        f"    ip daddr {address} tcp dport {port} drop {note}\n  }}\n"
        f"  chain in {{ type filter hook input priority -10; policy accept;\n"
        f"    ip saddr {address} tcp sport {port} drop {note}\n  }}\n}}\n"
    )


def cut(address: str, port: int, run_id: str, how: str | None = None) -> str:
    """Drop the traffic to and from ``address:port`` (TCP) on this host; the method used."""
    how = how or method()
    if how == "nftables":
        if _run("nft", "list", "table", "inet", NAME).returncode == 0:
            raise CutFailed(f"table inet {NAME} already exists on this host: another partition holds")
        _must("nft", "-f", "-", stdin=_nft_ruleset(address, port, run_id))
    elif how == "iptables":
        note = ["-m", "comment", "--comment", f"cmx partition of run {run_id}"]
        _must("iptables", "-w", "-N", NAME)
        try:
            _must("iptables", "-w", "-A", NAME, "-d", address, "-p", "tcp", "--dport", str(port), *note, "-j", "DROP")
            _must("iptables", "-w", "-A", NAME, "-s", address, "-p", "tcp", "--sport", str(port), *note, "-j", "DROP")
            _must("iptables", "-w", "-I", "OUTPUT", "-j", NAME)
            _must("iptables", "-w", "-I", "INPUT", "-j", NAME)
        except CutFailed:
            undo(address, "iptables")
            raise
    elif how == "route":
        _must("ip", "route", "add", "blackhole", f"{address}/32")
    else:
        raise CutFailed(f"unknown partition method {how!r} (one of {', '.join(METHODS)})")
    return how


def undo(address: str, how: str) -> None:
    """Remove what :func:`cut` made with method ``how``; nothing when it is already gone."""
    if how == "nftables":
        if _run("nft", "list", "table", "inet", NAME).returncode == 0:
            _must("nft", "delete", "table", "inet", NAME)
    elif how == "iptables":
        for hook in ("OUTPUT", "INPUT"):
            while _run("iptables", "-w", "-D", hook, "-j", NAME).returncode == 0:
                pass
        if _run("iptables", "-w", "-L", NAME, "-n").returncode == 0:
            _must("iptables", "-w", "-F", NAME)
            _must("iptables", "-w", "-X", NAME)
    else:
        done = _run("ip", "route", "del", "blackhole", f"{address}/32")
        if done.returncode and "No such process" not in done.stderr:
            raise CutFailed(f"ip route del blackhole {address}/32 failed: {done.stderr.strip()[:200]}")

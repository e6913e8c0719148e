"""Samples memory and CPU of one run's processes on one host, until SIGTERM or SIGINT.

    python -m cmx.workloads.host.sampler --run-dir DIR --host NAME [--interval 0.2] [--pss-every 5]
        [--pss-budget 0.3] [--watch ROLE=PIDFILE]... [--watch-port ROLE=PORT]...
        [--connections ROLE=KIND]... [--conn-interval 1.0]

Shipped to every host (Linux: it reads /proc): imports only the standard library and psutil;
redis and psycopg2 are imported lazily, by the connection probes that need them.

Files in the run dir (fixed names):

- ``samples.csv``      host,pid,role,ts,rss_bytes,pss_bytes,cpu_percent   one row per process
  per tick; ``ts`` is the tick's wall clock; ``pss_bytes`` is empty except on PSS ticks
  (every ``--pss-every``-th tick, spaced further apart when PSS reads would cost more than
  ``--pss-budget`` % of a core, and also on any tick whose summed RSS is a new high more than
  ``PSS_NEW_HIGH`` above every earlier PSS tick's, so a short-lived memory peak gets its PSS
  whatever the spacing: at most log(peak/start)/log(1 + PSS_NEW_HIGH) extra rounds per run);
  ``cpu_percent`` is % of one core since the previous tick (empty on a process's first tick).
- ``peaks.csv``        host,pid,role,name,vmhwm_bytes   one row per pid ever seen, its last
  VmHWM (the kernel's exact peak RSS).
- ``connections.csv``  host,role,kind,ts,count,client   the run's own clients of the
  broker/backend (``role``) per client role (worker, driver), by the names they gave themselves
  (workloads/host/connprobes.py); nobody else's, the probe's included.
- ``sampler.json``     settings, ticks, the sampler's own CPU cost, ``complete``, ``errors``.
- ``sampler.pid``       written at start, removed at a clean exit.

The time series are appended every ``FLUSH_EVERY_S`` (so a killed sampler loses at most that
and memory stays bounded); peaks.csv and sampler.json are rewritten atomically at each flush.
URLs (they carry passwords) are never printed or written.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import select
import signal
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import psutil

from cmx.workloads.host.connprobes import CONNECTION_KINDS, CONNECTIONS_HEADER, ConnectionSampler, make_probe, run_id_of

SAMPLES_HEADER = ("host", "pid", "role", "ts", "rss_bytes", "pss_bytes", "cpu_percent")
PEAKS_HEADER = ("host", "pid", "role", "name", "vmhwm_bytes")
SAMPLER_ROLE = "sampler"
#: Role of a watched pid's descendants; roles not listed here pass on unchanged
#: (driver's helpers, postgres backends under the postmaster, ...).
CHILD_ROLE = {"worker": "worker-child"}

FLUSH_EVERY_S = 10.0
#: A tick whose summed RSS exceeds every earlier PSS tick's by this fraction reads PSS too.
PSS_NEW_HIGH = 0.10
#: How often an unresolved --watch-port retries: psutil.net_connections walks every fd on the host.
PORT_RETRY_S = 1.0
#: The parent map is re-read whole this often, to bound the effect of pid reuse.
TREE_RESCAN_S = 10.0

_PSS_RE = re.compile(rb"^Pss:\s+(\d+) kB", re.MULTILINE)
_HAVE_SMAPS_ROLLUP = os.path.exists("/proc/self/smaps_rollup")
_USERINFO_RE = re.compile(r"(//)[^/@\s]+@")
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


# ----------------------------------------------------------------------------- /proc readers
# Read directly rather than through psutil: memory_info() + cpu_percent() cost ~60 µs a process
# here, two preads of kept-open files ~13 µs, and at 5 ticks/s over 20 processes that
# difference alone is ~0.5 % of a core. The numbers are those psutil reads (stat's rss field
# and statm's resident are the same counter; utime + stime over wall time is cpu_percent).

def _read(path: str, size: int = 16384) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def read_pidfile(path: Path) -> int | None:
    """The pid in a pidfile (first token), or None while it is absent, empty or half-written."""
    try:
        token = path.read_text().split(maxsplit=1)[0]
        return int(token)
    except (OSError, IndexError, ValueError):
        return None


class Stat(NamedTuple):
    """What one read of /proc/PID/stat gives the sampler."""

    name: str
    state: bytes        # R, S, D, Z, X...
    cpu_ticks: int      # utime + stime, in clock ticks
    rss_bytes: int


def parse_stat(data: bytes) -> Stat:
    close = data.rindex(b")")  # comm may contain spaces and ')'
    f = data[close + 2:].split()
    return Stat(name=data[data.index(b"(") + 1:close].decode(errors="replace"), state=f[0],
                cpu_ticks=int(f[11]) + int(f[12]), rss_bytes=int(f[21]) * _PAGE_SIZE)


def parse_vmhwm(data: bytes) -> int | None:
    """Peak RSS in bytes from /proc/PID/status text (None for kernel threads)."""
    at = data.find(b"\nVmHWM:")
    if at < 0:
        return None
    return int(data[at + 7:data.index(b"kB", at)]) * 1024


def read_stat(pid: int) -> Stat:
    """/proc/PID/stat; OSError (or ValueError) if the process is gone."""
    return parse_stat(_read(f"/proc/{pid}/stat", 4096))


def read_vmhwm(pid: int) -> int | None:
    """VmHWM of /proc/PID/status; OSError if the process is gone."""
    return parse_vmhwm(_read(f"/proc/{pid}/status"))


def read_pss(pid: int) -> int | None:
    """PSS in bytes (walks the page tables: costly for big processes), None if unreadable."""
    if not _HAVE_SMAPS_ROLLUP:
        try:
            return psutil.Process(pid).memory_full_info().pss
        except (psutil.Error, AttributeError):
            return None
    try:
        match = _PSS_RE.search(_read(f"/proc/{pid}/smaps_rollup"))
    except OSError:
        return None
    return int(match.group(1)) * 1024 if match else None


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def _holds(pid: int, fd_link: str) -> bool:
    """Whether process ``pid`` has an fd pointing at ``fd_link`` (e.g. ``socket:[1234]``)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == fd_link:
                return True
        except OSError:
            pass
    return False


def _read_ppid(pid: int) -> int | None:
    try:
        data = _read(f"/proc/{pid}/stat", 4096)
        return int(data[data.rindex(b")") + 2:].split(maxsplit=2)[1])
    except (OSError, ValueError, IndexError):
        return None


class ProcessTree:
    """Parent links of every process on the host, refreshed cheaply every tick.

    psutil's ``children(recursive=True)`` reads /proc/*/stat for every process on each call
    (~1.5 ms here). Instead: nothing is read while /proc/loadavg's last-created pid is unchanged
    (no process or thread was created, so no process can have gained a descendant; deaths only
    remove some, and their reads then fail); otherwise /proc is listed and only new pids cost
    a read, as a parent only changes when it dies. The map is re-read whole every TREE_RESCAN_S.
    """

    def __init__(self) -> None:
        self._ppid: dict[int, int] = {}
        self._children: dict[int, list[int]] = {}
        self._last_full = -math.inf
        self._last_pid = b""

    def refresh(self, now: float) -> None:
        full = now - self._last_full >= TREE_RESCAN_S
        try:
            last_pid = _read("/proc/loadavg", 256).rsplit(maxsplit=1)[-1]
        except (OSError, IndexError):
            last_pid = b""
        if not full and last_pid and last_pid == self._last_pid:
            return
        self._last_pid = last_pid
        known = {} if full else self._ppid
        ppid: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                pid = int(entry)
                parent = known.get(pid)
                if parent is None:
                    parent = _read_ppid(pid)
                if parent is not None:
                    ppid[pid] = parent
        children: dict[int, list[int]] = {}
        for pid, parent in ppid.items():
            children.setdefault(parent, []).append(pid)
        self._ppid, self._children = ppid, children
        if full:
            self._last_full = now

    def descendants(self, root: int, skip: int) -> list[int]:
        """All descendants of ``root``, not entering ``skip``'s subtree."""
        found, todo = [], list(self._children.get(root, ()))
        while todo:
            pid = todo.pop()
            if pid != skip:
                found.append(pid)
                todo.extend(self._children.get(pid, ()))
        return found

    def parent(self, pid: int) -> int:
        return self._ppid.get(pid, 0)

    def has_ancestor_in(self, pid: int, pids: set[int]) -> bool:
        seen = {pid}
        while (pid := self._ppid.get(pid, 0)) > 0 and pid not in seen:
            if pid in pids:
                return True
            seen.add(pid)
        return False


# ----------------------------------------------------------------------------- what to watch

class ErrorLog:
    """Probe failures, each kind recorded once, with every known secret redacted."""

    def __init__(self, secrets: list[str]) -> None:
        self.items: list[str] = []
        self._seen: set[str] = set()
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._lock = threading.Lock()

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return _USERINFO_RE.sub(r"\1***@", text)

    def record(self, where: str, error: BaseException | str) -> None:
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        with self._lock:
            if where not in self._seen:
                self._seen.add(where)
                self.items.append(self.redact(f"{where}: {message}"))


@dataclass(frozen=True)
class PidfileWatch:
    role: str
    path: Path

    def roots(self, tree: ProcessTree, now: float) -> list[int]:
        pid = read_pidfile(self.path)
        return [pid] if pid is not None and _alive(pid) else []


class PortWatch:
    """The process(es) listening on a TCP port; resolved again whenever they are all gone."""

    def __init__(self, role: str, port: int) -> None:
        self.role, self.port = role, port
        self.ever_found = False
        self._roots: list[int] = []
        self._next_try = -math.inf

    def roots(self, tree: ProcessTree, now: float) -> list[int]:
        alive = [pid for pid in self._roots if _alive(pid)]
        if not alive and now >= self._next_try:
            self._next_try = now + PORT_RETRY_S
            alive = self._roots = self._resolve(tree)
            self.ever_found |= bool(alive)
        return alive

    def _resolve(self, tree: ProcessTree) -> list[int]:
        try:
            conns = psutil.net_connections(kind="tcp")
        except psutil.Error:
            return []
        holders = set()
        for c in conns:
            if c.pid and c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == self.port:
                holders.add(c.pid)
                # psutil names one holder per socket, and forked children inherit it: climb to
                # the ancestors that hold it too (a pre-fork server's master).
                try:
                    socket_link = os.readlink(f"/proc/{c.pid}/fd/{c.fd}")
                except OSError:
                    continue
                pid = c.pid
                while (pid := tree.parent(pid)) > 1 and _holds(pid, socket_link):
                    holders.add(pid)
        # Keep the topmost holders; the others are their descendants.
        return sorted(pid for pid in holders if not tree.has_ancestor_in(pid, holders))


# ----------------------------------------------------------------------------- output

class Output:
    """The run dir's files: time series appended, small files replaced atomically."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def replace(self, name: str, text: str) -> None:
        tmp = self.run_dir / f"{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.run_dir / name)

    def replace_csv(self, name: str, header: tuple, rows: list[tuple]) -> None:
        tmp = self.run_dir / f"{name}.tmp"
        with open(tmp, "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(rows)
        os.replace(tmp, self.run_dir / name)

    def append_csv(self, name: str, rows: list[tuple]) -> None:
        if rows:
            with open(self.run_dir / name, "a", newline="") as f:
                csv.writer(f, lineterminator="\n").writerows(rows)


# ----------------------------------------------------------------------------- the sampler

@dataclass(frozen=True)
class SamplerConfig:
    run_dir: Path
    host: str
    interval_s: float = 0.2
    pss_every: int = 5
    pss_budget_percent: float = 0.3
    watches: tuple[PidfileWatch, ...] = ()
    ports: tuple[tuple[str, int], ...] = ()
    connections: tuple[tuple[str, str], ...] = ()
    conn_interval_s: float = 1.0


class _Stop:
    """SIGTERM/SIGINT set a flag and wake the tick wait through a pipe (no lock in a handler)."""

    def __init__(self) -> None:
        self.requested = False
        self._r, w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        self.requested = True

    def wait_until(self, deadline: float) -> bool:
        """Sleep until the monotonic ``deadline``; True if a stop was requested."""
        while not self.requested and (remaining := deadline - time.monotonic()) > 0:
            select.select([self._r], [], [], remaining)
            try:
                os.read(self._r, 512)
            except BlockingIOError:
                pass
        return self.requested


class WatchedProcess:
    """One watched process: its /proc files kept open, and its previous CPU reading.

    Re-reading an open /proc file with pread skips the path lookup (about half the cost of a
    read here), and once the process is gone its fds fail with ESRCH, so a reused pid is
    never mistaken for it.
    """

    __slots__ = ("stat_fd", "status_fd", "cpu_ticks", "at")

    def __init__(self, pid: int) -> None:
        self.stat_fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            self.status_fd = os.open(f"/proc/{pid}/status", os.O_RDONLY)
        except OSError:
            os.close(self.stat_fd)
            raise
        self.cpu_ticks: int | None = None
        self.at = 0.0

    def read(self) -> tuple[Stat, int | None]:
        return parse_stat(os.pread(self.stat_fd, 4096, 0)), parse_vmhwm(os.pread(self.status_fd, 16384, 0))

    def close(self) -> None:
        os.close(self.stat_fd)
        os.close(self.status_fd)


class Sampler:
    """One tick = one row per watched process; see the module docstring for the files."""

    def __init__(self, config: SamplerConfig, errors: ErrorLog) -> None:
        self.config, self.errors = config, errors
        self.ticks = self.late_ticks = self.pss_rounds = 0
        self.pss_cpu_seconds = 0.0
        self._last_pss_tick = -config.pss_every
        self._pss_not_before = -math.inf
        self._pss_seen_rss = 0  # highest summed RSS of any tick that read PSS
        self._own_pid = os.getpid()
        self._tree = ProcessTree()
        self._ports = [PortWatch(role, port) for role, port in config.ports]
        self._tracked: dict[int, WatchedProcess] = {}
        self._peaks: dict[int, tuple[str, str, int]] = {}
        self._rows: list[tuple] = []
        self._out = Output(config.run_dir)
        run_id = run_id_of(config.run_dir)
        probes = [make_probe(role, kind, run_id) for role, kind in config.connections]
        self._connections = ConnectionSampler(config.host, probes, config.conn_interval_s, errors)
        self._started_wall = time.time()
        self._started_mono = time.monotonic()
        self._startup_cpu = _own_cpu_seconds()

    def watched(self, now: float) -> dict[int, str]:
        """pid → role for this tick. First claim wins: the sampler, then roots, then descendants."""
        roles = {self._own_pid: SAMPLER_ROLE}
        sources = [*self.config.watches, *self._ports]
        if not sources:
            return roles
        self._tree.refresh(now)
        roots = [(pid, src.role) for src in sources for pid in src.roots(self._tree, now)]
        for pid, role in roots:
            roles.setdefault(pid, role)
        for pid, role in roots:
            child_role = CHILD_ROLE.get(role, role)
            for child in self._tree.descendants(pid, skip=self._own_pid):
                roles.setdefault(child, child_role)
        return roles

    def tick(self, with_pss: bool) -> None:
        ts = round(time.time(), 6)
        host = self.config.host
        roles = self.watched(time.monotonic())
        for pid in [pid for pid in self._tracked if pid not in roles]:
            self._untrack(pid)
        sampled = []
        for pid, role in roles.items():
            tracked = self._tracked.get(pid)
            try:
                if tracked is None:
                    tracked = self._tracked[pid] = WatchedProcess(pid)
                stat, hwm = tracked.read()
            except (OSError, ValueError, IndexError):  # vanished mid-tick, or not ours to read
                self._untrack(pid)
                continue
            if stat.state in (b"Z", b"X", b"x"):
                self._untrack(pid)
                continue
            now = time.monotonic()
            cpu = None  # no previous reading of this process: no rate yet
            if tracked.cpu_ticks is not None and now > tracked.at:
                cpu = round(100.0 * (stat.cpu_ticks - tracked.cpu_ticks) / _CLK_TCK / (now - tracked.at), 2)
            tracked.cpu_ticks, tracked.at = stat.cpu_ticks, now
            sampled.append((pid, role, stat.rss_bytes, cpu))
            if hwm is not None:
                self._peaks[pid] = (role, stat.name, hwm)
        rss_sum = sum(rss for _, _, rss, _ in sampled)
        if not with_pss and rss_sum > self._pss_seen_rss * (1 + PSS_NEW_HIGH):
            with_pss = True  # a memory high no PSS round has seen yet: read it now, budget or not
        if with_pss:
            self._pss_seen_rss = max(self._pss_seen_rss, rss_sum)
            # All PSS reads of a round share the tick's ts, so per-tick sums stay meaningful.
            cpu_before = time.thread_time()
            pss = {pid: read_pss(pid) for pid, _, _, _ in sampled}
            cost = time.thread_time() - cpu_before
            self.pss_cpu_seconds += cost
            self.pss_rounds += 1
            self._last_pss_tick = self.ticks
            budget = self.config.pss_budget_percent / 100
            if budget > 0:
                self._pss_not_before = time.monotonic() + cost / budget
        else:
            pss = {}
        self._rows.extend((host, pid, role, ts, rss, pss.get(pid), cpu) for pid, role, rss, cpu in sampled)

    def _untrack(self, pid: int) -> None:
        tracked = self._tracked.pop(pid, None)
        if tracked is not None:
            tracked.close()

    def pss_due(self, now: float) -> bool:
        """Every --pss-every-th tick, unless PSS reads would exceed --pss-budget of a core."""
        return self.ticks - self._last_pss_tick >= self.config.pss_every and now >= self._pss_not_before

    def run(self, stop: _Stop) -> None:
        """Ticks on a drift-free schedule until ``stop``; slots missed while busy are skipped."""
        interval = self.config.interval_s
        t0 = self._started_mono
        self._out.replace("sampler.pid", f"{self._own_pid}\n")
        for name, header in (("samples.csv", SAMPLES_HEADER), ("connections.csv", CONNECTIONS_HEADER)):
            self._out.replace_csv(name, header, [])
        self._connections.start()
        slot, next_flush = 0, t0 + FLUSH_EVERY_S
        while not stop.wait_until(due := t0 + slot * interval):
            if time.monotonic() - due > interval / 4:  # "late": over a quarter interval behind
                self.late_ticks += 1
            self.tick(with_pss=self.pss_due(time.monotonic()))
            self.ticks += 1
            now = time.monotonic()
            slot = max(slot + 1, int((now - t0) / interval))
            if now >= next_flush:
                self.flush(complete=False)
                next_flush = now + FLUSH_EVERY_S
        self._connections.stop()
        for pid in list(self._tracked):
            self._untrack(pid)
        for watch in self._ports:
            if not watch.ever_found:
                self.errors.record(f"watch-port {watch.role}={watch.port}", "no process listened on it")
        self.flush(complete=True)
        pidfile = self.config.run_dir / "sampler.pid"
        if read_pidfile(pidfile) == self._own_pid:
            pidfile.unlink()

    def flush(self, complete: bool) -> None:
        rows, self._rows = self._rows, []
        self._out.append_csv("samples.csv", rows)
        self._out.append_csv("connections.csv", self._connections.take_rows())
        host = self.config.host
        self._out.replace_csv("peaks.csv", PEAKS_HEADER,
                              [(host, pid, role, name, hwm) for pid, (role, name, hwm) in sorted(self._peaks.items())])
        self._out.replace("sampler.json", json.dumps(self.summary(complete), indent=2) + "\n")

    def summary(self, complete: bool) -> dict:
        times = os.times()
        return {
            "host": self.config.host,
            "interval_s": self.config.interval_s,
            "pss_every": self.config.pss_every,
            "pss_budget_percent": self.config.pss_budget_percent,
            "conn_interval_s": self.config.conn_interval_s,
            "ticks": self.ticks,
            "late_ticks": self.late_ticks,
            "pss_rounds": self.pss_rounds,
            "pss_cpu_seconds": round(self.pss_cpu_seconds, 3),
            # Whole-process CPU (all threads); startup (interpreter + imports) is also given
            # alone so steady-state cost is (cpu_seconds - startup_cpu_seconds) / wall_seconds.
            "cpu_seconds": round(times.user + times.system, 3),
            "startup_cpu_seconds": round(self._startup_cpu, 3),
            # Finished helper processes (rabbitmqctl): a cost to the host too.
            "children_cpu_seconds": round(times.children_user + times.children_system, 3),
            "wall_seconds": round(time.monotonic() - self._started_mono, 3),
            "started_at": self._started_wall,
            "complete": complete,
            "errors": list(self.errors.items),
        }


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


# ----------------------------------------------------------------------------- CLI

def _role_value(kind: str, convert):
    def parse(text: str):
        role, sep, value = text.partition("=")
        if not sep or not role or not value:
            raise argparse.ArgumentTypeError(f"expected ROLE={kind}, got {text!r}")
        try:
            return role, convert(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return parse


def _port(text: str) -> int:
    port = int(text)
    if not 0 < port < 65536:
        raise ValueError("port out of range")
    return port


def _kind(text: str) -> str:
    if text not in CONNECTION_KINDS:
        raise ValueError(f"kind must be one of {', '.join(CONNECTION_KINDS)}")
    return text


def _non_negative(convert):
    def parse(text: str):
        value = convert(text)
        if not value >= 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value
    return parse


def _positive(convert):
    def parse(text: str):
        value = convert(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    return parse


def parse_args(argv: list[str] | None) -> SamplerConfig:
    parser = argparse.ArgumentParser(prog="python -m cmx.workloads.host.sampler", description=__doc__.split("\n")[0])
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--host", required=True, help="the inventory name of this host")
    parser.add_argument("--interval", type=_positive(float), default=0.2, help="seconds between ticks")
    parser.add_argument("--pss-every", type=_positive(int), default=5, help="read PSS every N-th tick")
    parser.add_argument("--pss-budget", type=_non_negative(float), default=0.3, metavar="PERCENT",
                        help="space PSS rounds out so they cost at most this %% of a core (0: no limit)")
    parser.add_argument("--watch", action="append", default=[], metavar="ROLE=PIDFILE",
                        type=_role_value("PIDFILE", Path))
    parser.add_argument("--watch-port", action="append", default=[], metavar="ROLE=PORT",
                        type=_role_value("PORT", _port))
    parser.add_argument("--connections", action="append", default=[], metavar="ROLE=KIND",
                        type=_role_value("KIND", _kind))
    parser.add_argument("--conn-interval", type=_positive(float), default=1.0)
    args = parser.parse_args(argv)
    return SamplerConfig(
        run_dir=args.run_dir, host=args.host, interval_s=args.interval, pss_every=args.pss_every,
        pss_budget_percent=args.pss_budget,
        watches=tuple(PidfileWatch(role, path) for role, path in args.watch),
        ports=tuple(args.watch_port), connections=tuple(args.connections),
        conn_interval_s=args.conn_interval)


def _secrets_from_env() -> list[str]:
    secrets = []
    for name, value in os.environ.items():
        if name.startswith("CMX_") and (name.endswith("_URL") or name == "CMX_RABBITMQ_API") and value:
            secrets.append(value)
            try:
                password = urllib.parse.urlsplit(value).password
            except ValueError:
                password = None
            if password:
                secrets += [password, urllib.parse.unquote(password)]
    return secrets


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    config.run_dir.mkdir(parents=True, exist_ok=True)
    stop = _Stop()
    sampler = Sampler(config, ErrorLog(_secrets_from_env()))
    sampler.run(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())

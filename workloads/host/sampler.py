"""Samples memory and CPU of one run's processes on one host, until SIGTERM or SIGINT.

    python -m cmx.workloads.host.sampler --run-dir DIR --host NAME [--interval 0.2] [--pss-every 5]
        [--pss-budget 0.3] [--watch ROLE=PIDFILE]... [--watch-port ROLE=PORT]...
        [--connections ROLE=KIND]... [--conn-interval 0.25] [--keep-expiring]

Shipped to every host (Linux: it reads /proc): imports only the standard library and psutil;
redis and psycopg2 are imported lazily, by the connection probes that need them. Its parts:
procfs.py (reading /proc), pss.py (PSS and when to read it), watches.py (which processes),
connprobes.py (connections), sampler_output.py (writing, redaction); this module runs the ticks.

Files in the run dir (fixed names):

- ``samples.csv``      host,pid,role,ts,rss_bytes,pss_bytes,cpu_percent   one row per process
  per tick; ``ts`` is the tick's wall clock; ``pss_bytes`` is empty except on PSS ticks
  (every ``--pss-every``-th tick, spaced further apart when PSS reads would cost more than
  ``--pss-budget`` % of a core, and also on any tick whose summed RSS is a new high more than
  ``PSS_NEW_HIGH`` (pss.py) above every earlier PSS tick's, so a short-lived memory peak gets its PSS
  whatever the spacing: at most log(peak/start)/log(1 + PSS_NEW_HIGH) extra rounds per run);
  ``cpu_percent`` is % of one core since the previous tick (empty on a process's first tick).
- ``peaks.csv``        host,pid,role,name,vmhwm_bytes   one row per pid ever seen, its last
  VmHWM (the kernel's exact peak RSS).
- ``connections.csv``  host,role,kind,ts,count,client   the run's own clients of the
  broker/backend (``role``) per client role (worker, driver), by the names they gave themselves
  (workloads/host/connprobes.py); nobody else's, the probe's included.
- ``server_memory.csv`` host,role,kind,ts,node,used_bytes   the memory the broker/backend says it
  uses, per node that answered a probe tick (a cluster's: every running node's), by its own accounting.
- ``sample_marks.csv`` host,name,ts   the ticks that read PSS of every watched process for a mark
  of the run (workloads/runtime/runmarks.py: ``clock``, ``drain``); ``mark.NAME.sampled`` once done.
- ``noise.json``       the host's CPU, steal, load and pressure over the run, and the run's own CPU
  (noise.py: what else the host did meanwhile).
- ``sampler.json``     settings, ticks, the sampler's own CPU cost, ``complete``, ``errors``.
- ``sampler.pid``       written at start, removed at a clean exit.

The time series are appended every ``FLUSH_EVERY_S`` (so a killed sampler loses at most that
and memory stays bounded); peaks.csv and sampler.json are rewritten atomically at each flush.
URLs (they carry passwords) are never printed or written.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time

from cmx.workloads.host.connprobes import CONNECTIONS_HEADER, MEMORY_HEADER, ConnectionSampler, make_probe, run_id_of
from cmx.workloads.host.noise import NOISE_FILE, NoiseMeter
from cmx.workloads.host.procfs import CLK_TCK, ProcessTree, WatchedProcess, read_exe, read_pidfile
from cmx.workloads.host.pss import PssSchedule
from cmx.workloads.runtime.runmarks import MARKS, MARKS_HEADER, SIGNAL, mark_file, sampled_file
from cmx.workloads.host.sampler_args import SamplerConfig, parse_args
from cmx.workloads.host.sampler_output import PEAKS_HEADER, SAMPLES_HEADER, ErrorLog, Output, secrets_from_env
from cmx.workloads.host.watches import PortWatch

SAMPLER_ROLE = "sampler"
#: Role of a watched pid's pool children: its direct children that run its own program (forked,
#: never exec'd: billiard's prefork children). Any other descendant takes its root's role: the
#: ``uname -p`` a Celery worker runs at start counts in the worker's memory, not as a slot.
#: Roles not listed here pass on to every descendant unchanged (driver's helpers, postgres
#: backends under the postmaster, ...).
CHILD_ROLE = {"worker": "worker-child"}

FLUSH_EVERY_S = 10.0
#: Seconds between two settings of the TTL on the run's keys (--keep-expiring), at most a third of
#: the TTL: a key the run creates has one within this (one pipeline of a few EXPIREs: cheap).
KEEP_EVERY_S = 5.0


class _Stop:
    """SIGTERM/SIGINT set a flag and wake the tick wait through a pipe (no lock in a handler)."""

    def __init__(self) -> None:
        self.requested = False
        self.marked = False  # a mark of the run asks for a PSS reading now (runmarks.SIGNAL)
        self._r, w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._handle)
        signal.signal(SIGNAL, self._mark)

    def _handle(self, signum, frame) -> None:
        self.requested = True

    def _mark(self, signum, frame) -> None:
        self.marked = True

    def wait_until(self, deadline: float) -> bool:
        """Sleep until the monotonic ``deadline`` or a mark; True if a stop was requested."""
        while not self.requested and not self.marked and (remaining := deadline - time.monotonic()) > 0:
            select.select([self._r], [], [], remaining)
            try:
                os.read(self._r, 512)
            except BlockingIOError:
                pass
        return self.requested


class Sampler:
    """One tick = one row per watched process; see the module docstring for the files."""

    def __init__(self, config: SamplerConfig, errors: ErrorLog) -> None:
        self.config, self.errors = config, errors
        self.ticks = self.late_ticks = 0
        self.pss = PssSchedule(config.pss_every, config.pss_budget_percent)
        self._own_pid = os.getpid()
        self._tree = ProcessTree()
        self._noise = NoiseMeter()
        self._ports = [PortWatch(role, port) for role, port in config.ports]
        self._tracked: dict[int, WatchedProcess] = {}
        self._peaks: dict[int, tuple[str, str, int]] = {}
        self._rows: list[tuple] = []
        self._marks: dict[str, float] = {}  # mark → ts of the tick that read PSS for it
        self._out = Output(config.run_dir)
        run_id = run_id_of(config.run_dir)
        probes = [make_probe(role, kind, run_id) for role, kind in config.connections]
        self._connections = ConnectionSampler(config.host, probes, config.conn_interval_s, errors)
        if config.keep_expiring:  # imported now, so their cost counts as start-up, not as sampling
            import cmx.workloads.host.leftovers  # noqa: F401
            import cmx.workloads.runtime.spec  # noqa: F401
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
            child_role = CHILD_ROLE.get(role)
            program = read_exe(pid) if child_role else None
            for child in self._tree.descendants(pid, skip=self._own_pid):
                slot = child_role and self._tree.parent(child) == pid and read_exe(child) == program
                roles.setdefault(child, child_role if slot else role)
        return roles

    def take_marks(self) -> None:
        """A tick that reads PSS of every watched process for each new mark of the run."""
        for name in MARKS:
            if name not in self._marks and mark_file(self.config.run_dir, name).exists():
                self._marks[name] = self.tick(with_pss=True)
                self.ticks += 1
                self._out.replace_csv(
                    "sample_marks.csv", MARKS_HEADER, [(self.config.host, n, ts) for n, ts in self._marks.items()]
                )
                self._out.replace(sampled_file(self.config.run_dir, name).name, f"{self._marks[name]!r}\n")

    def tick(self, with_pss: bool) -> float:
        """One row per watched process; returns the tick's ts."""
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
                cpu = round(100.0 * (stat.cpu_ticks - tracked.cpu_ticks) / CLK_TCK / (now - tracked.at), 2)
            self._noise.process(tracked.cpu_ticks, stat.cpu_ticks, stat.start_ticks)
            tracked.cpu_ticks, tracked.at = stat.cpu_ticks, now
            sampled.append((pid, role, stat.rss_bytes, cpu))
            if hwm is not None:
                self._peaks[pid] = (role, stat.name, hwm)
        self._noise.tick(time.monotonic())  # the host's counters as the processes were read
        rss_sum = sum(rss for _, _, rss, _ in sampled)
        if with_pss or self.pss.new_high(rss_sum):
            # All PSS reads of a round share the tick's ts, so per-tick sums stay meaningful.
            pss = self.pss.read(self.ticks, [pid for pid, _, _, _ in sampled], rss_sum)
        else:
            pss = {}
        self._rows.extend((host, pid, role, ts, rss, pss.get(pid), cpu) for pid, role, rss, cpu in sampled)
        return ts

    def _untrack(self, pid: int) -> None:
        tracked = self._tracked.pop(pid, None)
        if tracked is not None:
            tracked.close()

    def run(self, stop: _Stop) -> None:
        """Ticks on a drift-free schedule until ``stop``; slots missed while busy are skipped."""
        interval = self.config.interval_s
        t0 = self._started_mono
        self._out.replace("sampler.pid", f"{self._own_pid}\n")
        for name, header in (
            ("samples.csv", SAMPLES_HEADER),
            ("connections.csv", CONNECTIONS_HEADER),
            ("server_memory.csv", MEMORY_HEADER),
        ):
            self._out.replace_csv(name, header, [])
        self._connections.start()
        self._noise.start()
        slot, next_flush, next_keep = 0, t0 + FLUSH_EVERY_S, t0
        while not stop.wait_until(due := t0 + slot * interval):
            stop.marked = False
            self.take_marks()  # woken by a mark, or one whose signal came before our handler
            if time.monotonic() < due:  # woken early by a mark: the scheduled tick is still to come
                continue
            if time.monotonic() - due > interval / 4:  # "late": over a quarter interval behind
                self.late_ticks += 1
            self.tick(with_pss=self.pss.due(self.ticks, time.monotonic()))
            self.ticks += 1
            now = time.monotonic()
            slot = max(slot + 1, int((now - t0) / interval))
            if now >= next_flush:
                self.flush(complete=False)
                next_flush = now + FLUSH_EVERY_S
            if self.config.keep_expiring and now >= next_keep:
                next_keep = now + self.keep_expiring()
        self._connections.stop()
        for pid in list(self._tracked):
            self._untrack(pid)
        for watch in self._ports:
            if not watch.ever_found:
                self.errors.record(f"watch-port {watch.role}={watch.port}", "no process listened on it")
        self.flush(complete=True)
        self._noise.close()
        pidfile = self.config.run_dir / "sampler.pid"
        if read_pidfile(pidfile) == self._own_pid:
            pidfile.unlink()

    def keep_expiring(self) -> float:
        """Set the TTL on the run's keys anew (workloads/host/leftovers.py); seconds until the next time."""
        from cmx.workloads.host.leftovers import keep_expiring
        from cmx.workloads.runtime.spec import RunSpec

        try:
            spec = RunSpec.load(self.config.run_dir)
            keep_expiring(spec)
        except Exception as exc:  # a TTL is worth less than the samples
            self.errors.record("keep-expiring", f"{type(exc).__name__}: {exc}")
            return KEEP_EVERY_S
        return min(KEEP_EVERY_S, (spec.queue_expires_s or 3 * KEEP_EVERY_S) / 3)

    def flush(self, complete: bool) -> None:
        rows, self._rows = self._rows, []
        self._out.append_csv("samples.csv", rows)
        self._out.append_csv("connections.csv", self._connections.take_rows())
        self._out.append_csv("server_memory.csv", self._connections.take_memory_rows())
        host = self.config.host
        self._out.replace_csv(
            "peaks.csv",
            PEAKS_HEADER,
            [(host, pid, role, name, hwm) for pid, (role, name, hwm) in sorted(self._peaks.items())],
        )
        self._out.replace(NOISE_FILE, json.dumps(self._noise.summary(host), indent=2) + "\n")
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
            "pss_rounds": self.pss.rounds,
            "marks": dict(self._marks),
            "pss_cpu_seconds": round(self.pss.cpu_seconds, 3),
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


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv, __doc__.split("\n")[0])
    config.run_dir.mkdir(parents=True, exist_ok=True)
    stop = _Stop()
    sampler = Sampler(config, ErrorLog(secrets_from_env()))
    sampler.run(stop)
    return 0


if __name__ == "__main__":
    from cmx.workloads.runtime.quickexit import exit_now

    exit_now(main())  # without the interpreter's teardown: the run's stop waits for it

"""The controller's side of the host agents (workloads/host/agent.py): one per host, for the sweep.

Started once after provisioning, each through its host's own connection (engine/hosts/connection.py),
each in a session of its own (a Ctrl-C at the terminal reaches the controller only, which then
stops the run through the agents). Requests are JSON lines; a reader thread per agent matches
answers to requests and keeps the worker events an agent sends unasked (a worker ended or took
its first task: workloads/runtime/workerevents.py) per run, for :meth:`Agents.events`; one thread pings
every agent every ``PING_EVERY_S`` so that its lease holds.
If the controller dies, the agents' stdin ends and they stop everything they started.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cmx.engine.hosts.connection import Connection

PING_EVERY_S = 5.0
HELLO_TIMEOUT_S = 45.0  # ssh connect (bounded by its ConnectTimeout) and the agent's start
QUIT_TIMEOUT_S = 15.0


class AgentLost(Exception):
    """The agent's process ended or cannot be reached; the message says why."""


@dataclass
class _Pending:
    done: threading.Event
    dest: Path | None = None
    reply: dict | None = None
    error: str | None = None
    #: Why the bytes that came with the answer could not be written to ``dest`` (a full disk):
    #: they were read all the same, so the stream and the agent go on.
    write_error: str | None = None


class Agent:
    def __init__(
        self,
        conn: Connection,
        argv: list[str],
        log: Path,
        on_event: Callable[[str, dict], None] = lambda run_id, event: None,
    ):
        self.conn, self.argv, self.log, self.on_event = conn, argv, log, on_event
        self.proc: subprocess.Popen | None = None
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._hello = threading.Event()
        self.lost: str | None = None

    @property
    def host(self) -> str:
        return self.conn.host

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the agent's own comes with its command
        try:
            err = open(self.log, "ab")
        except OSError:  # a full or read-only results disk: the agent's own words are an aid only
            err = subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
                env=env,
                cwd="/",
            )
        finally:
            if err is not subprocess.DEVNULL:
                err.close()
        threading.Thread(target=self._read, daemon=True, name=f"agent-{self.host}").start()

    def wait_ready(self, timeout: float = HELLO_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not self._hello.wait(0.05):
            if self.lost or time.monotonic() > deadline:
                self.kill()
                raise AgentLost(self.lost or f"no answer within {timeout:g} s")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.lost is None and self.proc.poll() is None

    def _read(self) -> None:
        out = self.proc.stdout
        try:
            while True:
                line = out.readline()
                if not line:
                    break
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("hello"):
                    self._hello.set()
                    continue
                if "event" in msg and "id" not in msg:
                    self.on_event(str(msg.get("run_id")), msg["event"])
                    continue
                with self._lock:
                    pending = self._pending.pop(msg.get("id"), None)
                size = int(msg.get("bytes") or 0)
                if size:
                    self._take_bytes(out, size, pending)
                if pending:
                    pending.reply = msg
                    pending.done.set()
        except (OSError, ValueError) as exc:
            self.lost = f"reading from it failed: {exc}"
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.lost = self.lost or f"its process ended ({self._why()})"
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for p in pending:
            p.error = self.lost
            p.done.set()

    def _take_bytes(self, out, size: int, pending: _Pending | None) -> None:
        """Read the ``size`` bytes that follow an answer into its ``dest``; a write that fails
        (a full or read-only results disk) is noted on ``pending`` and the rest is read anyway."""
        dest = pending.dest if pending else None
        sink = None
        try:
            if dest:
                try:
                    sink = open(dest, "wb")
                except OSError as exc:
                    pending.write_error = f"writing {dest} failed: {exc.strerror or exc}"
            while size:
                chunk = out.read(min(size, 1 << 20))
                if not chunk:
                    raise OSError("the stream ended inside a pack")
                size -= len(chunk)
                if sink:
                    try:
                        sink.write(chunk)
                    except OSError as exc:
                        pending.write_error = f"writing {dest} failed: {exc.strerror or exc}"
                        sink.close()
                        sink = None
        finally:
            if sink:
                sink.close()

    def _why(self) -> str:
        """The last line the agent (or ssh) wrote to its log."""
        try:
            lines = [ln.strip() for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            lines = []
        rc = self.proc.returncode if self.proc else None
        return f"exit {rc}" + (f": {lines[-1][:300]}" if lines else "")

    def _write(self, msg: dict) -> None:
        data = (json.dumps(msg) + "\n").encode()
        with self._lock:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                raise AgentLost(self.lost or f"writing to it failed: {exc}") from None

    def request(self, cmd: str, dest: Path | None = None, **args) -> _Pending:
        """Send a request; its answer arrives in the returned record (see :meth:`wait`)."""
        if not self.alive:
            raise AgentLost(self.lost or "not running")
        with self._lock:
            self._next += 1
            ident = self._next
            pending = self._pending[ident] = _Pending(threading.Event(), dest)
        self._write({"id": ident, "cmd": cmd, **args})
        return pending

    def ping(self) -> None:
        if self.alive:
            try:
                self._write({"cmd": "ping"})
            except AgentLost:
                pass

    def quit(self, timeout: float = QUIT_TIMEOUT_S) -> None:
        if self.proc is None:
            return
        if self.alive:
            try:
                self.request("quit")
            except AgentLost:
                pass
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def wait(
    pending: _Pending, timeout: float, cancel: Callable[[], bool] | None = None, tick: Callable[[], None] | None = None
) -> dict:
    """The answer; AgentLost when the agent went away, TimeoutError after ``timeout`` s,
    InterruptedError as soon as ``cancel()`` is true. ``tick()`` is called while waiting, every 50 ms."""
    deadline = time.monotonic() + timeout
    while not pending.done.wait(0.05):
        if tick:
            tick()
        if cancel and cancel():
            raise InterruptedError("cancelled")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no answer within {timeout:g} s")
    if pending.error:
        raise AgentLost(pending.error)
    return pending.reply or {}


class Agents:
    """One agent per host of the sweep; :meth:`close` ends them all."""

    def __init__(self, conns: dict[str, Connection], lib_key: str, log_dir: Path, lease_s: float = 20.0):
        self.conns, self.lib_key, self.log_dir, self.lease_s = conns, lib_key, log_dir, lease_s
        self.agents: dict[str, Agent] = {}
        self._events: dict[str, list[dict]] = {}
        self._events_lock = threading.Lock()
        self._stop = threading.Event()
        self._pinger = threading.Thread(target=self._ping, daemon=True, name="agent-pings")

    def start(self, hosts: list[str]) -> dict[str, str]:
        """Start (or restart) the agents of ``hosts`` that are not running, in parallel; {host: why}
        for those that did not answer."""
        starting = []
        for h in hosts:
            if h in self.agents and self.agents[h].alive:
                continue
            conn = self.conns[h]
            agent = Agent(
                conn, conn.agent_command(self.lib_key, self.lease_s), self.log_dir / f"{h}.log", self._on_event
            )
            try:
                agent.start()
            except OSError as exc:
                return {h: f"cannot start {agent.argv[0]}: {exc}"}
            self.agents[h] = agent
            starting.append(agent)
        failed = {}
        for agent in starting:
            try:
                agent.wait_ready()
            except AgentLost as exc:
                failed[agent.host] = str(exc)
        if not self._pinger.is_alive() and not self._stop.is_set():
            self._pinger.start()
        return failed

    def _on_event(self, run_id: str, event: dict) -> None:
        with self._events_lock:
            self._events.setdefault(run_id, []).append(event)

    def events(self, run_id: str) -> list[dict]:
        """The worker events of the run the agents sent so far, in arrival order."""
        with self._events_lock:
            return list(self._events.get(run_id, ()))

    def forget(self, run_id: str) -> None:
        with self._events_lock:
            self._events.pop(run_id, None)

    def __getitem__(self, host: str) -> Agent:
        return self.agents[host]

    def _ping(self) -> None:
        while not self._stop.wait(PING_EVERY_S):
            for agent in list(self.agents.values()):
                agent.ping()

    def close(self) -> None:
        self._stop.set()
        threads = [threading.Thread(target=a.quit, daemon=True) for a in self.agents.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(QUIT_TIMEOUT_S + 10)

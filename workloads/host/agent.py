"""The cmx agent of one host: started once per sweep, it runs every run's start, drive and finish.

    python -m cmx.workloads.host.agent --host NAME --workdir DIR [--lease 20]

The controller (engine/hosts/agents.py) starts it after provisioning (a local process, or through
one ``ssh`` per host) and talks to it in JSON lines: a request on stdin ``{"id": N, "cmd": ...}``
gets one answer on stdout ``{"id": N, "ok": true|false, ...}``; an answer with ``"bytes": K`` is
followed by K raw bytes (a run's pack). Commands:

  ping        keeps the lease (no answer without an id)
  begin       run_id, payload: hostrun.begin (spec, secrets, sampler, service, worker; with
              "driver": true the driver's imports start too); {"rc", "error"}
  drive       run_id, timeout: the driver, until it ends or the timeout; {"rc", "timed_out"}
  finish      run_id, grace, reset, clock_port, keep: hostrun.finish_report (stop, reset, facts, pack);
              with "send_pack": true the pack follows the answer as bytes (one round trip a run)
  tell        run_id, events: worker events from other hosts, for this host's driver (its run
              dir's worker_events.json: workloads/runtime/workerevents.py)
  fault       run_id, index, fault, delay_s, restart_s, ready_timeout: inject one of the run's
              faults on this host after delay_s (workloads/host/faultinject.py); its record
  quit        stop what runs, answer, exit

Unasked, the agent sends ``{"event": {...}, "run_id": ...}`` when a run's worker on this host
ends or first takes a task of the run (:func:`cmx.workloads.runtime.workerevents.observe`, every
:data:`WATCH_EVERY_S`), until the run's finish begins: a busy or dead worker says neither itself.

Secrets arrive inside ``begin``'s payload on stdin: never in a command line, environment of a
visible command or log. Each command but ping and quit runs in its own thread, so pings are
answered during a drive.

The lease: everything the agent started (workers and their children, samplers, services,
drivers: whole process groups) is stopped, what the runs under way left on the broker and backend
is removed (on the driver's host), and the agent exits, when its stdin ends (the controller
died, SSH dropped), on SIGTERM/SIGHUP/SIGINT, or when nothing arrived for ``--lease`` seconds.
A broker restart under way (a restart_broker fault) is let finish first: never a broker left stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

LEASE_S = 20.0
#: Seconds a stopped run's processes get when the lease ends (no one waits for their results).
LEASE_STOP_GRACE_S = 2.0
#: How often the run dirs are looked at for a worker's end or first receipt (a few stat calls).
WATCH_EVERY_S = 0.2


@dataclass
class RunState:
    run_dir: Path
    lock: threading.Lock = field(default_factory=threading.Lock)  # begin and finish, one at a time
    cancelled: threading.Event = field(default_factory=threading.Event)
    driver: object = None  # the driver's Popen while it runs
    reported: set = field(default_factory=set)  # keys of the worker events sent to the controller
    events_lock: threading.Lock = field(default_factory=threading.Lock)  # worker_events.json, one writer
    drives: bool = False  # this host runs the driver: it removes the run's leftovers on the broker


class Agent:
    def __init__(self, host: str, workdir: Path, lease_s: float, out) -> None:
        self.host, self.workdir, self.lease_s = host, workdir, lease_s
        self.out = out
        self.write_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.last_seen = time.monotonic()
        self.runs: dict[str, RunState] = {}
        self.ended = threading.Event()
        self.why = ""

    # -- protocol -------------------------------------------------------------------------
    def send(self, msg: dict, pack: Path | None = None) -> None:
        line = (json.dumps(msg) + "\n").encode()
        try:
            with self.write_lock:
                self.out.write(line)
                if pack is not None:
                    with open(pack, "rb") as f:
                        while chunk := f.read(1 << 20):
                            self.out.write(chunk)
                self.out.flush()
        except (BrokenPipeError, OSError, ValueError):  # the controller is gone
            self.end("the controller stopped reading")

    def handle(self, line: bytes) -> None:
        self.last_seen = time.monotonic()
        try:
            msg = json.loads(line)
            cmd = msg["cmd"]
        except (ValueError, KeyError, TypeError):
            self.send({"ok": False, "error": "not a JSON command line"})
            return
        if cmd == "ping":
            if "id" in msg:
                self.send({"id": msg["id"], "ok": True, "pid": os.getpid()})
            return
        if cmd == "quit":
            self.send({"id": msg.get("id"), "ok": True})
            self.end("asked to quit")
            return
        handler = {
            "begin": self.begin,
            "drive": self.drive,
            "finish": self.finish,
            "tell": self.tell,
            "fault": self.fault,
        }.get(cmd)
        if handler is None:
            self.send({"id": msg.get("id"), "ok": False, "error": f"unknown command {cmd!r}"})
            return
        threading.Thread(target=self._answer, args=(handler, msg), daemon=True).start()

    def _answer(self, handler, msg: dict) -> None:
        try:
            reply = handler(msg)
        except Exception as exc:  # the controller says which host and step failed
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:400]}
        reply = {"ok": True, **reply}
        pack, unlink = reply.pop("_pack", None), reply.pop("_unlink", False)
        self.send({"id": msg.get("id"), **reply}, pack)
        if pack is not None and unlink:  # sent: the controller keeps the artifacts
            pack.unlink(missing_ok=True)

    # -- commands -------------------------------------------------------------------------
    def _state(self, run_id: str) -> RunState:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise ValueError(f"bad run id {run_id!r}")
        with self.state_lock:
            if run_id not in self.runs:
                run_dir = self.workdir / "runs" / run_id
                run_dir.mkdir(parents=True, exist_ok=True)
                self.runs[run_id] = RunState(run_dir)
            return self.runs[run_id]

    def _enter(self, state: RunState) -> None:
        """What hostctl's command line sets up for every command of a run."""
        os.environ["CMX_RUN_DIR"], os.environ["CMX_HOST"] = str(state.run_dir), self.host

    def begin(self, msg: dict) -> dict:
        from cmx.workloads.host import hostctl, hostrun

        state = self._state(msg["run_id"])
        with state.lock:
            if state.cancelled.is_set():
                return {"rc": 1, "error": "the run was stopped before it began"}
            self._enter(state)

            def warm() -> None:  # the driver's imports overlap the worker's start
                state.driver = hostctl.start_driver(state.run_dir, warm=True)

            state.drives = bool(msg["payload"].get("driver"))
            rc = hostrun.begin(
                state.run_dir,
                self.host,
                msg["payload"],
                state.cancelled.is_set,
                warm if msg["payload"].get("driver") else None,
            )
        return {"rc": rc, "error": hostrun.begin_error(state.run_dir) if rc else None}

    def drive(self, msg: dict) -> dict:
        from cmx.workloads.host import hostctl, hostrun

        state = self._state(msg["run_id"])
        with state.lock:
            if state.cancelled.is_set():
                return {"rc": 1, "timed_out": False, "error": "the run was stopped before it drove"}
            self._enter(state)
            hostrun.load_secrets(state.run_dir)
            proc = state.driver
            if proc is not None and proc.poll() is None:  # imported during begin: it starts now
                proc.stdin.write(b"go\n")
                proc.stdin.close()
            else:
                state.driver = proc = hostctl.start_driver(state.run_dir)
        deadline = time.monotonic() + float(msg.get("timeout") or 3600)
        timed_out = False
        while proc.poll() is None:
            if state.cancelled.is_set() or time.monotonic() > deadline:
                timed_out = not state.cancelled.is_set()
                hostctl.end_group(proc, 2.0)
                break
            time.sleep(0.02)
        return {"rc": proc.returncode, "timed_out": timed_out}

    def finish(self, msg: dict) -> dict:
        from cmx.workloads.host import hostctl, hostrun

        state = self._state(msg["run_id"])
        state.cancelled.set()  # a begin or drive still under way ends now
        if state.driver is not None and state.driver.poll() is None:  # one never told to go, or cancelled
            hostctl.end_group(state.driver, 2.0)
        with state.lock:
            self._enter(state)
            hostrun.load_secrets(state.run_dir)  # reset needs the broker's URL
            try:
                report = hostrun.finish_report(
                    state.run_dir,
                    self.host,
                    float(msg.get("grace", 10)),
                    bool(msg.get("reset")),
                    msg.get("clock_port"),
                    bool(msg.get("keep")),
                )
            finally:
                hostrun.forget_secrets()
                with self.state_lock:
                    self.runs.pop(msg["run_id"], None)
        if msg.get("send_pack") and report.get("pack"):  # over SSH: no second round trip to fetch it
            pack = Path(report["pack"])
            report |= {"bytes": pack.stat().st_size, "_pack": pack, "_unlink": not msg.get("keep")}
        return report

    def tell(self, msg: dict) -> dict:
        from cmx.workloads.runtime import workerevents

        state = self._state(msg["run_id"])
        with state.events_lock:
            known = workerevents.record(state.run_dir, list(msg.get("events") or []))
        return {"events": len(known)}

    def fault(self, msg: dict) -> dict:
        """Inject one fault of the run on this host; its events go out as they happen."""
        from cmx.workloads.runtime import workerevents
        from cmx.workloads.host import faultinject, hostctl, hostrun

        run_id = msg["run_id"]
        state = self._state(run_id)
        self._enter(state)
        hostrun.load_secrets(state.run_dir)  # where the broker is (a partition cuts this host off it)

        def send(event) -> None:
            state.reported.add(event.key)
            with state.events_lock:  # a driver on this host knows it before it sees the worker's exit
                workerevents.record(state.run_dir, [asdict(event)])
            self.send({"event": asdict(event), "run_id": run_id})

        def replacement() -> int:  # the same node, consuming the run's queue at once (a restarted unit)
            from cmx.workloads.runtime.spec import RunSpec

            # Under the run's lock: a finish or the lease's end (which cancel first, then stop
            # what runs) never misses a replacement started beside them.
            with state.lock:
                if state.cancelled.is_set() or self.ended.is_set():
                    return 1
                hostrun.load_secrets(state.run_dir)
                queue = RunSpec.load(state.run_dir).queue
                return hostctl.start_worker(
                    state.run_dir,
                    self.host,
                    float(msg.get("ready_timeout") or 60),
                    state.cancelled.is_set,
                    queues=queue,
                )

        return faultinject.inject(
            state.run_dir, self.host, {**msg, "workdir": str(self.workdir)}, state.cancelled.is_set, send, replacement
        )

    def watch_workers(self) -> None:
        """Send every new worker event of the runs under way (not once their finish began: the
        stop ends the worker on purpose)."""
        from cmx.workloads.runtime import workerevents

        while not self.ended.wait(WATCH_EVERY_S):
            with self.state_lock:
                runs = list(self.runs.items())
            for run_id, state in runs:
                if state.cancelled.is_set():
                    continue
                for event in workerevents.observe(state.run_dir, self.host):
                    if event.key not in state.reported:
                        state.reported.add(event.key)
                        if event.kind == workerevents.CLOCK:  # how late it is seen: faults are timed from it
                            event = replace(event, age_s=max(time.time() - event.at, 0.0))
                        self.send({"event": asdict(event), "run_id": run_id})

    # -- the lease ------------------------------------------------------------------------
    def end(self, why: str) -> None:
        if not self.ended.is_set():
            self.why = why
            self.ended.set()

    def watch(self) -> None:
        while not self.ended.wait(0.5):
            if time.monotonic() - self.last_seen > self.lease_s:
                self.end(f"no word from the controller for {self.lease_s:g} s")

    def stop_everything(self) -> None:
        """Stop every run still under way on this host: its driver, then its processes together
        (hostctl.stop), undo a fault's partition, then whatever is left of every process group the
        agent started; then wait (bounded) for a broker restart under way to finish, and remove
        what the runs left on their broker."""
        from cmx.workloads.host import faultinject, hostctl, hostrun

        with self.state_lock:
            states = list(self.runs.values())
        for state in states:
            state.cancelled.set()
        for state in states:
            # A fault's replacement worker being started holds the lock; cancelled, it lets go at once.
            got = state.lock.acquire(timeout=10)
            if got:
                state.lock.release()
            if state.driver is not None:
                hostctl.end_group(state.driver, LEASE_STOP_GRACE_S)
            try:
                hostctl.stop(state.run_dir, LEASE_STOP_GRACE_S)
            except Exception as exc:  # the groups below still go
                print(f"stopping {state.run_dir} failed: {exc}", file=sys.stderr)
            try:  # what a fault of the run still holds (a partition): the host's routes as they were
                faultinject.undo(state.run_dir)
            except Exception as exc:
                print(f"undoing the faults of {state.run_dir} failed: {exc}", file=sys.stderr)
        for proc in list(hostctl.SPAWNED):
            if proc.poll() is None:
                hostctl.end_group(proc, LEASE_STOP_GRACE_S)
        hostctl.reap()
        # Once the run's processes are stopped: the agent's exit would cut a broker restart under
        # way (a restart_broker fault) between its stop and its start; the broker must answer again
        # before what the run left on it can be removed.
        if not faultinject.restarts_done():
            print("a broker restart (fault) was still under way when the agent stopped", file=sys.stderr)
        for state in states:
            if state.drives:  # no finish will come: what the run left on the broker goes now
                try:
                    hostrun.load_secrets(state.run_dir)
                    hostctl.reset(state.run_dir)
                except Exception as exc:  # the servers' own expiry takes what is left
                    print(f"removing the leftovers of {state.run_dir} failed: {exc}", file=sys.stderr)
                hostrun.forget_secrets()
            (state.run_dir / hostrun.SECRETS).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m cmx.workloads.host.agent",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--host", required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--lease", type=float, default=LEASE_S, help="seconds without word before it stops all")
    args = ap.parse_args(argv)
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but answers on the protocol stream
    agent = Agent(args.host, args.workdir.resolve(), args.lease, out)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: agent.end(f"signal {signal.Signals(signum).name}"))

    def read() -> None:
        stdin = sys.stdin.buffer
        while not agent.ended.is_set():
            line = stdin.readline()
            if not line:
                agent.end("its stdin ended (the controller is gone)")
                return
            if line.strip():
                agent.handle(line)

    threading.Thread(target=read, daemon=True).start()
    threading.Thread(target=agent.watch, daemon=True).start()
    threading.Thread(target=agent.watch_workers, daemon=True).start()
    agent.send({"hello": True, "host": args.host, "pid": os.getpid()})
    while not agent.ended.wait(0.5):  # the main thread waits, so signals are handled at once
        pass
    agent.stop_everything()
    print(f"cmx agent on {args.host}: stopped ({agent.why})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # Not sys.exit: the reader thread may sit in stdin.readline() holding stdin's lock, which
    # makes the interpreter's shutdown abort. Everything the agent started is stopped by now.
    os._exit(code)

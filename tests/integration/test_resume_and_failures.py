"""Interrupting, resuming, timeouts, on_error and bad input: nothing stored is ever lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tests.conftest import CMX, REPO, cmx, query, run_processes, write

pytestmark = pytest.mark.integration


def test_ctrl_c_stops_the_run_keeps_the_rest_and_resume_finishes(tmp_path):
    exp = write(
        tmp_path / "resume.yaml",
        """
        name: resume
        workload: {name: throughput, params: {tasks: 400, mode: stream, rate: 100}}
        matrix: {pool: [threads, gevent, solo]}
        fixed: {broker: redis}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [*CMX, "run", str(exp), "--db", str(db)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Wait until the second run is under way (each run takes ~4 s of streaming), then Ctrl-C.
    artifacts = db.parent / "artifacts"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        runs = [d for d in artifacts.glob("*") if d.is_dir()] if artifacts.exists() else []
        if len(runs) == 2 and run_processes(db):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the second run never started")
    time.sleep(1.5)  # inside the drive
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted" in stderr
    assert run_processes(db) == []
    rows = query(db, "SELECT pool, status, error FROM runs ORDER BY started_at")
    assert [(p, s) for p, s, _ in rows] == [("threads", "ok"), ("gevent", "interrupted")]
    assert "interrupted" in rows[1][2]
    first_ok = query(db, "SELECT run_id FROM runs WHERE status = 'ok'")

    again = cmx("run", str(exp), "--db", str(db))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 run(s) already stored as ok are skipped" in again.stdout
    rows = query(db, "SELECT pool, status FROM runs ORDER BY started_at")
    assert rows == [("threads", "ok"), ("gevent", "interrupted"), ("gevent", "ok"), ("solo", "ok")]
    assert query(db, "SELECT run_id FROM runs WHERE pool = 'threads'") == first_ok  # not run twice
    per_run = query(
        db,
        """SELECT r.pool, count(DISTINCT t.task_id) FROM tasks t JOIN runs r USING (run_id)
                           WHERE r.status = 'ok' AND t.state = 'SUCCESS' GROUP BY r.pool ORDER BY r.pool""",
    )
    assert per_run == [("gevent", 400), ("solo", 400), ("threads", 400)]
    # The sweep that resumed is the same point of history as the one it resumed.
    first, second = query(db, "SELECT sweep_id, planned, resumes FROM sweeps ORDER BY started_at")
    assert first[1:] == (3, None) and second[1:] == (2, first[0])
    trend = cmx("trend", "resume", "--db", str(db), "--metric", "consume_rate", "--format", "json")
    assert trend.returncode == 0, trend.stderr
    assert [[p["at"] for p in s["points"]] for s in json.loads(trend.stdout)["series"]] == [[first[0]]] * 3


def test_sigterm_is_ctrl_c(tmp_path):
    """timeout(1), CI runners and systemd stop a sweep with SIGTERM: the run is stopped and
    stored as interrupted, nothing is left running, exit 130, as with Ctrl-C."""
    exp = write(
        tmp_path / "term.yaml",
        """
        name: term
        workload: {name: throughput, params: {tasks: 3000, mode: stream, rate: 100}}
        fixed: {broker: redis, pool: threads}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [*CMX, "run", str(exp), "--db", str(db)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # the driver runs once the workers consume
        if db.exists() and any(
            "cmx.workloads.app.driver" in " ".join(p.info["cmdline"] or []) for p in run_processes(db)
        ):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the run never started driving")
    time.sleep(2)
    assert _status_counts(db, "term")["running"] == "1"  # its sweep is alive
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr, stderr
    assert query(db, "SELECT status FROM runs") == [("interrupted",)]
    # What it published and never ran is not run, not lost (issue 43): the run stopped before them.
    m = dict(query(db, "SELECT name, value FROM metrics"))
    assert m["tasks_not_run"] == m["tasks_published"] - m["tasks_completed"], m
    assert m["tasks_lost"] == (None if m["tasks_not_run"] else 0), m
    assert run_processes(db) == []
    counts = _status_counts(db, "term")
    assert counts["interrupted"] == "1" and counts["running"] == "0" and counts["abandoned"] == "0", counts


def _status_counts(db, experiment: str) -> dict[str, str]:
    """The experiment's row of `cmx status`, by column title."""
    proc = cmx("status", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = next(ln for ln in lines if "interrupted" in ln)
    row = next(ln for ln in lines if ln.strip("│ ").startswith(experiment + " "))
    return dict(zip([c.strip() for c in header.strip("┃").split("┃")], [c.strip() for c in row.strip("│").split("│")]))


def test_timeout_is_stored_and_the_sweep_goes_on(tmp_path):
    exp = write(
        tmp_path / "timeout.yaml",
        """
        name: timeouts
        workload: {name: throughput, params: {mode: stream, rate: 50}}
        matrix: {params.tasks: [2000, 20]}
        fixed: {pool: threads}
        limits: {run_timeout: 4s}
        on_error: continue
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = query(db, 'SELECT "params.tasks", status, error, run_id FROM runs ORDER BY started_at')
    assert [(t, s) for t, s, _, _ in rows] == [(2000, "timeout"), (20, "ok")]
    assert "run_timeout" in rows[0][2]
    art = db.parent / "artifacts" / rows[0][3] / "localhost"
    assert (art / "driver.json").exists() and (art / "worker.log").exists()  # artifacts kept
    # what did run before the timeout is stored too, never silently dropped
    assert query(db, "SELECT count(*) FROM tasks WHERE run_id = ? AND state = 'SUCCESS'", [rows[0][3]])[0][0] > 0
    assert run_processes(db) == []


def test_on_error_abort_stops_the_sweep(tmp_path):
    exp = write(
        tmp_path / "abort.yaml",
        """
        name: aborts
        workload: {name: throughput, params: {mode: stream, rate: 50}}
        matrix: {params.tasks: [2000, 20]}
        fixed: {pool: threads}
        limits: {run_timeout: 3s}
        on_error: abort
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db))
    assert proc.returncode == 1
    assert query(db, "SELECT status FROM runs") == [("timeout",)]


def test_a_broker_that_is_down_is_one_clear_line_and_nothing_runs(tmp_path):
    inv = write(
        tmp_path / "down.yml",
        """
        all:
          vars: {ansible_connection: local, ansible_python_interpreter: "{{ ansible_playbook_python }}",
                 python_env_interpreter: "{{ ansible_playbook_python }}"}
          children:
            brokers: {hosts: {localhost: {broker_url: "redis://127.0.0.1:1/0"}}}
            workers: {hosts: {localhost: {}}}
            drivers: {hosts: {localhost: {}}}
    """,
    )
    exp = write(tmp_path / "e.yaml", "name: down\nworkload: {name: throughput, params: {tasks: 10}}\n")
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "broker redis://127.0.0.1:1/0 does not answer" in lines[0], proc.stderr
    assert query(db, "SELECT count(*) FROM runs") == [(0,)]


def test_bad_input_exits_2_with_file_line_col(tmp_path):
    exp = write(
        tmp_path / "bad.yaml",
        """
        name: bad
        workload: {name: throughput}
        matrix:
          pool: [prefork, fork]
          concurrency: []
    """,
    )
    for command in ("validate", "plan", "run"):
        proc = cmx(command, str(exp))
        assert proc.returncode == 2, command
        assert "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert any(line.startswith(f"{exp}:4:") and "fork" in line for line in lines), proc.stderr
        assert any(line.startswith(f"{exp}:5:") for line in lines), proc.stderr


def test_machines_beyond_the_inventory_is_a_validation_error(tmp_path):
    exp = write(
        tmp_path / "m.yaml",
        """
        name: machines
        workload: {name: throughput}
        matrix:
          machines: [1, 3]
    """,
    )
    proc = cmx("validate", str(exp))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"{exp}:4:") and "group 'workers'" in proc.stderr


def test_missing_inventory_and_bad_cli_args(tmp_path):
    exp = write(tmp_path / "e.yaml", "name: e\nworkload: {name: throughput}\n")
    proc = cmx("run", str(exp), "--inventory", str(tmp_path / "nope.yml"))
    assert proc.returncode == 2 and "inventory not found" in proc.stderr
    proc = cmx("run", str(exp), "--only", "pool=nothing-like-this")
    assert proc.returncode == 2 and "matches no cell" in proc.stderr
    assert cmx("run").returncode == 2
    assert cmx("sql", "SELEC nonsense", "--db", str(tmp_path / "none.duckdb")).returncode == 2


def test_a_broken_inventory_is_one_line_naming_file_and_place(tmp_path):
    exp = write(tmp_path / "e.yaml", "name: e\nworkload: {name: throughput}\n")
    syntax = write(
        tmp_path / "syntax.yml",
        """
        all:
          children:
            brokers:
              hosts:
                localhost: {ansible_connection: local
    """,
    )
    port = write(
        tmp_path / "port.yml",
        """
        all:
          vars: {ansible_connection: local}
          children:
            brokers: {hosts: {localhost: {redis_port: six}}}
            workers: {hosts: {localhost: {}}}
            drivers: {hosts: {localhost: {}}}
    """,
    )
    for command in ("validate", "run"):
        proc = cmx(command, str(exp), "--inventory", str(syntax))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
        assert proc.stderr.splitlines() == [proc.stderr.strip()], proc.stderr  # one line, no Ansible warnings
        assert proc.stderr.startswith(f"{syntax}:6:1: invalid YAML") and "flow mapping" in proc.stderr, proc.stderr
        proc = cmx(command, str(exp), "--inventory", str(port))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
        assert proc.stderr.strip() == (
            f"{port}: host 'localhost': redis_port must be a port number (1-65535), got 'six'"
        ), proc.stderr


def test_a_results_file_that_is_not_ours_is_one_line_and_left_alone(tmp_path):
    foreign = tmp_path / "foreign.duckdb"
    foreign.write_bytes(b"not a database\n" * 10)
    exp = REPO / "experiments" / "quickstart.yaml"
    for args in (("status",), ("report", "quickstart"), ("compare", "a", "b"), ("sql", "SELECT 1"), ("run", str(exp))):
        proc = cmx(*args, "--db", str(foreign))
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr + proc.stdout, args
        assert proc.stderr.strip().startswith(f"{foreign}: cannot open it as a results database"), proc.stderr
    assert foreign.read_bytes() == b"not a database\n" * 10  # nothing written over it


def test_data_that_looks_like_markup_is_printed_as_it_is(tmp_path):
    db = tmp_path / "r.duckdb"
    from cmx.engine.results import db as results_db

    with results_db.connect(db):
        pass
    proc = cmx("sql", "SELECT '[/red]' AS \"[b]\", '[bold]x' AS v", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert "[/red]" in proc.stdout and "[bold]x" in proc.stdout and "[b]" in proc.stdout
    exp = write(
        tmp_path / "q.yaml",
        """
        name: q
        workload: {name: throughput}
        matrix: {celery.worker_log_format: ["[/q]", "[bold]x"]}
    """,
    )
    proc = cmx("plan", str(exp))
    assert proc.returncode == 0, proc.stderr
    assert "[/q]" in proc.stdout and "[bold]x" in proc.stdout


def test_an_experiment_name_taken_by_another_workload_is_refused(tmp_path):
    from cmx.engine.results import db as results_db

    db = tmp_path / "r.duckdb"
    with results_db.connect(db) as con:
        results_db.record_sweep(con, "s0", "shared-name", "elsewhere/fanout.yaml", "memory_fanout", "", "inv", {})
    exp = write(tmp_path / "e.yaml", "name: shared-name\nworkload: {name: throughput}\n")
    proc = cmx("run", str(exp), "--db", str(db))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        f"{exp}: experiment name 'shared-name' is taken in {db} by a sweep of workload "
        "'memory_fanout' (from elsewhere/fanout.yaml): give this experiment its own "
        "name, or pass another --db"
    ), proc.stderr
    assert query(db, "SELECT count(*) FROM run_starts") == [(0,)]

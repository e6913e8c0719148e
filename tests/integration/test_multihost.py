"""Multi-machine sweeps across real SSH, to test hosts in network namespaces (tests/nethosts.py).

h1 runs the brokers and the backends (a Redis, a RabbitMQ and a PostgreSQL the sweep provisions
itself, with generated passwords) and the driver; h2 and h3 are workers. The hosts reach nothing
but the controller's bridge, so their venvs can only come from what the controller ships.
"""

from __future__ import annotations

import json
import os
import threading
import time

import psutil
import pytest

from tests.conftest import cmx, query, write
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("nethosts_can_be_made")]

TASKS = 200


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    with NetHosts(root / "net", 3) as net:
        inv = net.inventory(
            root / "lab.yml",
            {"brokers": ["h1"], "backends": ["h1"], "drivers": ["h1"], "workers": ["h2", "h3"]},
            workdir_root=root / "hosts",
        )
        exp = write(
            root / "multi.yaml",
            f"""
            name: multi-host
            # stream (2 s of arrivals), so every worker gets a share: in backlog mode the worker
            # that adds the queue first can drain 200 no-op tasks before the other starts.
            workload: {{name: throughput, params: {{tasks: {TASKS}, mode: stream, rate: 100}}}}
            fixed: {{pool: threads, concurrency: 2, broker: redis}}
            matrix: {{machines: [1, 2]}}
            include:
              - {{machines: 2, backend: redis}}
              - {{machines: 2, backend: postgres}}
              - {{machines: 2, broker: rabbitmq-quorum}}
            limits: {{run_timeout: 2m}}
        """,
        )
        db = root / "results" / "cmx.duckdb"
        started = time.monotonic()
        with CommandLines() as lines:  # every command line seen while the sweep runs
            proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db))
        seconds = time.monotonic() - started
        print(f"multi-host sweep: {seconds:.1f} s for 5 runs on 3 hosts; {lines.scans} command-line scans")
        leftovers = {h.name: [_describe(p) for p in net.pids(h) if not _is_ssh(p)] for h in net.hosts}
        LAB_EXTRA.update(root=root, lines=lines)
        yield net, inv, exp, db, proc, leftovers


LAB_EXTRA: dict = {}


class CommandLines(threading.Thread):
    """Collects the distinct command lines of every process on this machine (the namespace
    hosts' included: they share its process table) until the block ends."""

    def __init__(self):
        super().__init__(daemon=True)
        self.seen: set[str] = set()
        self.scans = 0
        self._done = threading.Event()

    def __enter__(self) -> "CommandLines":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self.join(10)

    def run(self) -> None:
        while not self._done.is_set():
            for p in psutil.process_iter(["cmdline"]):
                self.seen.add(" ".join(p.info["cmdline"] or []))
            self.scans += 1


def _is_ssh(pid: int) -> bool:
    """sshd and the sessions of Ansible's persistent SSH connections are not the sweep's."""
    try:
        return open(f"/proc/{pid}/comm").read().strip().startswith("sshd")
    except OSError:
        return True  # gone already


def _describe(pid: int) -> str:
    try:
        return f"{pid}: " + open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return f"{pid}: (gone)"


def test_sweep_over_ssh_is_ok_and_loses_nothing(lab):
    *_, db, proc, _ = lab
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    rows = query(
        db,
        """SELECT machines, broker, backend, status, value FROM runs JOIN metrics USING (run_id)
                        WHERE name = 'tasks_completed' ORDER BY ALL""",
    )
    assert rows == [
        (1, "redis", "none", "ok", TASKS),
        (2, "rabbitmq-quorum", "none", "ok", TASKS),
        (2, "redis", "none", "ok", TASKS),
        (2, "redis", "postgres", "ok", TASKS),
        (2, "redis", "redis", "ok", TASKS),
    ]


def test_machines_n_means_tasks_on_exactly_n_hosts(lab):
    *_, db, _, _ = lab
    rows = query(
        db,
        """SELECT r.machines, list(DISTINCT t.host ORDER BY t.host)
                        FROM tasks t JOIN runs r USING (run_id) GROUP BY r.run_id, r.machines ORDER BY ALL""",
    )
    assert rows == [(1, ["h2"])] + [(2, ["h2", "h3"])] * 4


def test_every_host_has_metadata_and_a_measured_clock_offset(lab):
    *_, db, _, _ = lab
    rows = query(
        db,
        """SELECT r.machines, h.host, h.cores, h.python, h.celery, h.broker_version,
                               h.clock_offset_s, h.clock_uncertainty_s
                        FROM hosts h JOIN runs r USING (run_id) ORDER BY ALL""",
    )
    assert {(m, h) for m, h, *_ in rows} == {(1, "h1"), (1, "h2"), (2, "h1"), (2, "h2"), (2, "h3")}
    for _, host, cores, python, celery, broker_version, offset, uncertainty in rows:
        assert cores >= 1 and python.startswith("3.") and celery, host
        assert broker_version.startswith(("redis", "RabbitMQ")), host
        # one kernel clock underneath: the measured offset must be ~0 within its uncertainty
        assert offset is not None and uncertainty is not None and uncertainty < 0.05, host
        assert abs(offset) <= uncertainty + 0.005, (host, offset, uncertainty)


def test_the_provisioned_postgres_backend_was_used_and_keeps_no_result_of_the_runs(lab):
    """The workers wrote their results to the PostgreSQL the sweep provisioned (they held
    connections to it, and Celery made its table there), and each run removed its rows at its end
    (workloads/host/leftovers.py): the next run measures a backend holding nothing of this one."""
    import json

    import psycopg2

    net, *_, db, _, _ = lab
    password = json.loads((db.parent / ".secrets.json").read_text())["postgres_password"]
    ids = [
        t for (t,) in query(db, "SELECT t.task_id FROM tasks t JOIN runs r USING (run_id) WHERE r.backend = 'postgres'")
    ]
    assert len(set(ids)) == TASKS
    used = query(
        db,
        """SELECT max(value) FROM runs JOIN metrics USING (run_id)
                        WHERE backend = 'postgres' AND name = 'backend_connections_worker_max'""",
    )
    assert used[0][0] is not None and used[0][0] >= 1, used
    # It was stopped with the sweep; start it again just to read what it kept: its table, none of the rows.
    import subprocess

    data = net.postgres_dir(net.hosts[0])
    pg_ctl = sorted(__import__("glob").glob("/usr/lib/postgresql/*/bin/pg_ctl"))[-1]
    started = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            net.hosts[0].ns,
            "runuser",
            "-u",
            "postgres",
            "--",
            pg_ctl,
            "-D",
            data,
            "-l",
            f"{data}/server.log",
            "-w",
            "start",
        ],
        capture_output=True,
        text=True,
    )
    assert started.returncode == 0, started.stdout + started.stderr + open(f"{data}/server.log").read()[-1500:]
    try:
        with (
            psycopg2.connect(
                host=net.hosts[0].address, user="postgres", password=password, dbname="postgres", connect_timeout=5
            ) as con,
            con.cursor() as cur,
        ):
            cur.execute("SELECT count(*) FROM celery_taskmeta WHERE task_id = ANY(%s)", [ids])
            assert cur.fetchone()[0] == 0
    finally:
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                net.hosts[0].ns,
                "runuser",
                "-u",
                "postgres",
                "--",
                pg_ctl,
                "-D",
                data,
                "-m",
                "fast",
                "-w",
                "stop",
            ],
            capture_output=True,
        )


def test_the_provisioned_broker_is_sampled_and_counted(lab):
    *_, db, _, _ = lab
    assert query(db, "SELECT DISTINCT host FROM samples WHERE role = 'broker'") == [("h1",)]
    # counted by INFO clients for Redis, by the provisioned node's management API for RabbitMQ
    counts = dict(
        query(
            db,
            """SELECT r.broker, min(m.value) FROM metrics m JOIN runs r USING (run_id)
                               WHERE m.name = 'broker_connections_max' GROUP BY r.broker""",
        )
    )
    assert counts["redis"] >= 1 and counts["rabbitmq-quorum"] >= 1, counts


def test_cross_host_clocks_are_applied_and_connections_are_the_runs_own(lab):
    *_, db, _, _ = lab
    rows = query(
        db,
        """SELECT r.machines, r.backend, m.name, m.value FROM metrics m JOIN runs r USING (run_id)
                        WHERE m.name IN ('clock_uncertainty_s', 'clock_uncorrected_tasks', 'clock_suspect',
                                         'broker_connections_worker_max', 'backend_connections_worker_max')""",
    )
    by: dict = {}
    for machines, backend, name, value in rows:
        by.setdefault((machines, backend), {}).setdefault(name, []).append(value)
    for (machines, backend), v in by.items():
        # Tasks published on h1 ran on h2/h3: every offset known, its uncertainty carried.
        assert v["clock_uncorrected_tasks"] == [0] * len(v["clock_uncorrected_tasks"]), (machines, v)
        assert min(v["clock_uncertainty_s"]) > 0, (machines, v)
        # Each worker host's worker reaches the broker under the run's name (one at least each).
        assert min(v["broker_connections_worker_max"]) >= machines, (machines, backend, v)
        if backend in ("redis", "postgres"):
            assert min(v["backend_connections_worker_max"]) >= 1, (machines, backend, v)
    # The metric is the task rows' latency on the controller's clock (offsets applied).
    for run_id, metric, want in query(
        db,
        """
            SELECT run_id, any_value(m.value), quantile_cont(t.finished_at - t.origin_at, 0.5)
            FROM task_times t JOIN metrics m USING (run_id)
            WHERE m.name = 'latency_p50_s' AND t.state <> 'LOST' GROUP BY run_id""",
    ):
        assert metric == pytest.approx(want, rel=1e-9), run_id


def test_nothing_started_by_the_sweep_is_left_on_any_host(lab):
    *_, leftovers = lab
    assert leftovers == {"h1": [], "h2": [], "h3": []}


def test_the_password_never_leaves_the_secrets_file(lab):
    net, inv, exp, db, proc, _ = lab
    import json

    stored = json.loads((db.parent / ".secrets.json").read_text())
    for password in (stored["redis_password"], stored["postgres_password"], stored["rabbitmq_password"]):
        assert len(password) >= 20
        assert password not in proc.stdout + proc.stderr
        assert password.encode() not in db.read_bytes()
        for f in (db.parent / "artifacts").rglob("*"):
            if f.is_file():
                assert password.encode() not in f.read_bytes(), f


def test_an_unreachable_host_is_named_and_nothing_is_stored_as_ok(lab, tmp_path):
    net, *_ = lab
    inv = tmp_path / "bad.yml"
    inv.write_text(f"""
all:
  vars:
    ansible_user: root
    ansible_ssh_private_key_file: {net.key}
    ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=3
    ansible_python_interpreter: /usr/bin/python3
  children:
    brokers: {{hosts: {{h1: {{ansible_host: {net.hosts[0].address}, cmx_workdir: {tmp_path}/h1}}}}}}
    drivers: {{hosts: {{h1: {{}}}}}}
    workers: {{hosts: {{ghost: {{ansible_host: {net.subnet}.99, cmx_workdir: {tmp_path}/ghost}}}}}}
""")
    exp = write(tmp_path / "e.yaml", "name: ghost\nworkload: {name: throughput, params: {tasks: 10}}\n")
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db))
    # The run that needs the host fails naming it (engine/hosts/reach.py); nothing is provisioned.
    assert proc.returncode == 1, proc.stderr
    [(status, error)] = query(db, "SELECT status, error FROM runs")
    assert status == "failed" and error.startswith("host ghost was unreachable when the sweep started"), error


def test_no_secret_in_any_command_line_or_leftover_file(lab):
    """The sweep's generated passwords (kept 0600 in results/.secrets.json, by design) appear in
    no command line seen during the sweep and in no other file it left on the controller or the
    hosts (but the Redis config, which must hold its own password)."""
    *_, proc, _ = lab
    root, lines = LAB_EXTRA["root"], LAB_EXTRA["lines"]
    passwords = list(json.loads((root / "results" / ".secrets.json").read_text()).values())
    assert passwords and lines.scans > 20
    assert [ln[:200] for ln in lines.seen if any(pw in ln for pw in passwords)] == []
    assert not any(pw in proc.stdout + proc.stderr for pw in passwords)
    found = []
    for base in (root / "results", root / "hosts"):
        for dirpath, _, files in os.walk(base):
            for name in files:
                path = os.path.join(dirpath, name)
                if name == ".secrets.json" or path.endswith("/redis/redis.conf"):
                    continue
                try:
                    data = open(path, "rb").read()
                except OSError:
                    continue
                if any(pw.encode() in data for pw in passwords):
                    found.append(path)
    assert found == []

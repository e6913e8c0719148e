"""Shared test helpers: run the real `cmx` CLI, write experiments, read the results database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from cmx.analysis import views

REPO = Path(__file__).resolve().parent.parent
CMX = [sys.executable, "-m", "cmx.cli.main"]

#: The xdist worker this process is (gw0, gw1 …; "main" without xdist): the one source of
#: per-worker names, so any two tests can run at once. A sweep on the built-in inventory works in
#: its host's default work dir, whose lock lets one sweep at a time in (engine/hosts/hostlock.py):
#: each worker gets a work-dir root of its own (CMX_WORKDIR_ROOT, engine/paths.py), inherited by
#: every cmx the tests start. Kept across suites, as a lab host keeps its provisioned venv.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
# Set, not defaulted: xdist's controller imports this file before it starts the workers, which
# inherit its environment (a default there would give every worker the controller's root).
os.environ["CMX_WORKDIR_ROOT"] = f"/var/tmp/cmx-test/{WORKER}"
# An xdist worker starts with COLUMNS=80 and LINES=24 in its environment (a serial pytest has
# neither), and every cmx a test starts would print to 80 columns instead of a log's width
# (cli/tables.py LOG_WIDTH), cutting the tables the tests read. A worker runs as a serial pytest does.
if WORKER != "main":
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


def cmx(*args: str, cwd: Path = REPO, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the real CLI as a user would, from the repository (the user's workspace)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [*CMX, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env
    )


def write(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(body).lstrip())
    return path


def local_inventory(
    path: Path, workdir: Path, *, brokers: dict | None = None, backends: dict | None = None, seeded: bool = True
) -> Path:
    """An inventory of this machine alone, over Ansible's local connection with the controller's own
    Python (``ansible_playbook_python``) for Ansible and the hosts' venvs, its work dir ``workdir``:
    localhost in brokers (with the host variables ``brokers``), workers and drivers, and in backends
    when ``backends`` is given (``{}``: no variables). ``seeded``: the work dir is provisioned
    already (tests/hostseed.py); a test whose subject is provisioning passes False."""
    if seeded:
        from tests.hostseed import seed_local

        seed_local(workdir)

    def group(name: str, hostvars: dict | None) -> str:
        return f"    {name}: {{hosts: {{localhost: {json.dumps(hostvars) if hostvars else ''}}}}}"

    lines = [
        "all:",
        "  vars:",
        "    ansible_connection: local",
        '    ansible_python_interpreter: "{{ ansible_playbook_python }}"',
        '    python_env_interpreter: "{{ ansible_playbook_python }}"',
        f"    cmx_workdir: {workdir}",
        "  children:",
        group("brokers", brokers or {}),
        *([group("backends", backends)] if backends is not None else []),
        group("workers", None),
        group("drivers", None),
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path


#: This machine's RabbitMQ management API (guest/guest on loopback).
RABBIT_API = "http://127.0.0.1:15672/api"


def rabbit_api(method: str, path: str, body: dict | None = None):
    """RabbitMQ's management API (guest on this machine's server); the decoded answer, if any."""
    import base64
    import urllib.request

    request = urllib.request.Request(
        f"{RABBIT_API}/{path}",
        method=method,
        data=json.dumps(body).encode() if body else None,
        headers={
            "content-type": "application/json",
            "authorization": "Basic " + base64.b64encode(b"guest:guest").decode(),
        },
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read()
    return json.loads(text) if text else None


def forget_redis(url: str, name: str) -> None:
    """Remove what a test's own Celery app left on Redis under its unique queue ``name``: the queue,
    and kombu's binding records of its exchange (``_kombu.binding.<name>`` and
    ``_kombu.binding_permanent.<name>``, the exchange named after the default queue). The suite's
    end checks that no such key is left (tests/machine_state.py)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(f"*{name}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def query(db: Path, sql: str, params=None) -> list[tuple]:
    """Read the results database as `cmx sql` does (waits while a live sweep holds its brief
    write lock; the analysis views are there)."""
    with views.connect(db, read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def problems(path: str) -> list[str]:
    """The one-line problems `cmx validate` would print for the experiment file at ``path``."""
    from cmx.engine.errors import InputError
    from cmx.engine.model.load import load_experiment

    with pytest.raises(InputError) as info:
        load_experiment(path)
    assert info.value.exit_code == 2
    return [str(p) for p in info.value.problems]


def sweep(tmp: Path, name: str, body: str) -> Path:
    """Run one experiment (its own results database) and return the database; every run must be ok."""
    exp = write(tmp / f"{name}.yaml", f"name: {name}\n" + textwrap.dedent(body).lstrip())
    db = tmp / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return db


def metrics_by(db: Path, dims: str) -> dict:
    """{dimension value (a tuple when several): {metric: value}} over the runs (one run per cell)."""
    out: dict = {}
    ndims = len(dims.split(","))
    for *key, name, value in query(db, f"SELECT {dims}, name, value FROM metrics JOIN runs USING (run_id)"):
        out.setdefault(tuple(key) if ndims > 1 else key[0], {})[name] = value
    return out


def run_processes(db: Path | None = None) -> list[psutil.Process]:
    """Processes started for runs (workers and their children, samplers, drivers): those of the
    runs stored in ``db`` when given (other sweeps may share this machine), else any."""
    run_ids = [r for (r,) in query(db, "SELECT run_id FROM runs")] if db is not None and db.exists() else None
    found = []
    for p in psutil.process_iter(["cmdline", "cwd"]):
        where = " ".join(p.info["cmdline"] or []) + " " + (p.info["cwd"] or "")
        if not any(
            s in where
            for s in (
                "cmx.workloads.app.worker",
                "cmx.workloads.host.sampler",
                "cmx.workloads.app.driver",
                "multiprocessing",
                "/runs/",
            )
        ):
            continue
        if run_ids is None or any(r in where for r in run_ids):
            found.append(p)
    return found


@pytest.fixture(scope="module")
def nethosts_can_be_made() -> None:
    """The multi-host modules' prerequisite (root, ip, sshd), by the project's policy
    (tests/prereqs.py): missing, the tests fail saying what; CMX_ALLOW_SKIP=1 skips them knowingly.
    A module asks for it with ``pytest.mark.usefixtures("nethosts_can_be_made")``."""
    from tests.nethosts import missing
    from tests.prereqs import require

    require(missing())


def driving(workdir: Path) -> set[str]:
    """Run ids whose driver drives now: its process runs in <workdir>/<host>/runs/<run_id> and
    wrote driver.pid there (it does when it starts driving; its imports come earlier)."""
    found = set()
    for p in psutil.process_iter(["cmdline", "cwd"]):
        cwd = p.info["cwd"] or ""
        if (
            "cmx.workloads.app.driver" in " ".join(p.info["cmdline"] or [])
            and cwd.startswith(str(workdir))
            and (Path(cwd) / "driver.pid").exists()
        ):
            found.add(Path(cwd).name)
    return found


@pytest.fixture
def results(tmp_path) -> Path:
    """A results database path of the test's own (artifacts and wheelhouse land beside it)."""
    return tmp_path / "results" / "cmx.duckdb"


# The machine as the suite found it (tests/machine_state.py): read when the whole suite starts, on
# the one process that sees it end (xdist's controller, or pytest itself without workers), and
# compared when every test has ended. Anything left behind fails the suite, named.
_STATE_BEFORE = "cmx_machine_before"


def _whole_suite(config) -> bool:
    roots = {REPO.resolve(), (REPO / "tests").resolve()}
    return not hasattr(config, "workerinput") and all(
        Path(a.split("::")[0]).resolve() in roots for a in (config.args or ["tests"])
    )


def pytest_sessionstart(session):
    if _whole_suite(session.config) and not session.config.option.collectonly:
        from tests import machine_state

        setattr(session.config, _STATE_BEFORE, machine_state.snapshot())


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, _STATE_BEFORE, None)
    if before is None:
        return
    from tests import machine_state

    left = machine_state.left_behind(before, machine_state.snapshot())
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        write = reporter.write_line if reporter else (lambda line, **_: print(line))
        write("")
        write("LEFT BEHIND: the suite left these on the machine (tests/machine_state.py):", red=True)
        for kind, items in left.items():
            write(f"  {kind} ({len(items)}): " + "; ".join(items[:20]) + (" ..." if len(items) > 20 else ""))
        if session.exitstatus == 0:
            session.exitstatus = 1


def pytest_configure_node(node):
    """xdist, on the controller: each worker is told the scheduling (it sees its own --dist as "no")."""
    from tests.order import DIST

    node.workerinput[DIST] = node.config.getoption("dist")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """In parallel, the longest tests first, spread over the workers (tests/order.py)."""
    from tests.order import reorder

    reorder(config, items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test holds the machine while it runs, with its module's fixtures' setup and teardown:
    shared, or whole when it is marked ``alone``; one at a time among those marked ``serial`` with
    the same name (tests/alone.py)."""
    from tests.alone import hold

    root = item.config._tmp_path_factory.getbasetemp()
    if hasattr(item.config, "workerinput"):
        root = root.parent  # xdist: each worker's basetemp is popen-gwN inside the suite's own
    alone, serial = item.get_closest_marker("alone"), item.get_closest_marker("serial")
    with hold(root / "cmx-machine", alone=alone is not None, serial=serial.args[0] if serial else None):
        yield

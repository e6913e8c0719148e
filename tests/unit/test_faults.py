"""The fault dimension's form and checks (workloads/faults/, engine/model/faultcheck.py): one-line
problems at the value, exit 2, before any host is touched."""

from __future__ import annotations

import pytest

from cmx.engine.model.cells import expand
from cmx.engine.model.experiment import parse_duration
from cmx.engine.model.faultcheck import hosts_problem
from cmx.engine.model.load import load_experiment
from cmx.workloads import faults
from tests.conftest import problems

HEAD = "name: f\nworkload: {name: concurrent_sleep, params: {tasks: 4, sleep_s: 1}}\n"


def write(tmp_path, text: str):
    path = tmp_path / "exp.yaml"
    path.write_text(HEAD + text)
    return path


def test_a_fault_value_reads_as_its_faults_in_time_order():
    assert faults.parse("none") == ()
    assert faults.parse("kill_worker@2s+kill_child@500ms") == (
        faults.Fault("kill_child", 0.5),
        faults.Fault("kill_worker", 2.0),
    )
    assert faults.parse("partition_worker@3/5s") == (faults.Fault("partition_worker", 3.0, 5.0),)
    assert faults.canonical("term_worker@1m") == "term_worker@60"
    assert faults.canonical(" kill_child@3s ") == faults.canonical("kill_child@3") == "kill_child@3"
    assert parse_duration is faults.parse_duration  # one reader of durations for the file and the faults


def test_a_worker_fault_names_the_worker_host_it_strikes():
    assert faults.parse("kill_worker@2s:2") == (faults.Fault("kill_worker", 2.0, None, 2),)
    assert faults.parse("partition_worker@3s/20s:all") == (faults.Fault("partition_worker", 3.0, 20.0, "all"),)
    assert faults.parse("kill_worker@2:1") == faults.parse("kill_worker@2")  # the first host is the default...
    assert faults.canonical("kill_worker@2s:1") == "kill_worker@2"  # ...and keeps the cell id it had
    assert faults.canonical("kill_worker@2s:2+term_worker@1:all") == "term_worker@1:all+kill_worker@2:2"
    (second,), (every,) = faults.parse("kill_worker@2:2"), faults.parse("kill_child@1:all")
    assert second.hosts_of(("w1", "w2", "w3")) == ("w2",) and every.hosts_of(("w1", "w2")) == ("w1", "w2")
    assert (second.strikes(3), every.strikes(3)) == (1, 3)
    with pytest.raises(ValueError):
        second.hosts_of(("w1",))


def test_a_target_beyond_the_cells_machines_is_refused_at_its_value(tmp_path):
    path = write(tmp_path, "fixed: {pool: threads}\nmatrix:\n  machines: [1, 2]\n  fault: [kill_worker@1:2]\n")
    assert problems(path) == [
        f"{path}:6:11: fault kill_worker@1:2: it strikes the run's worker host 2, but this cell runs on 1 (machines: 1)"
    ]
    load_experiment(
        write(
            tmp_path, "fixed: {pool: threads, machines: 2}\nmatrix:\n  fault: [kill_worker@1:2, 'kill_worker@1:all']\n"
        )
    )  # fine


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "kill_kid@3",
            "unknown fault kind 'kill_kid' in 'kill_kid@3' (known: kill_child, kill_worker, term_worker, "
            "restart_broker, partition_worker, failover_broker, kill_broker_node)",
        ),
        (
            "kill_child",
            "fault 'kill_child' needs a time: kill_child@TIME, seconds from the clock start (e.g. kill_child@3s)",
        ),
        ("kill_child@soon", "fault 'kill_child@soon': the time must be a duration such as 3, 3s or 250ms"),
        (
            "partition_worker@3",
            "fault 'partition_worker@3' needs a duration: partition_worker@T/D (D seconds, "
            "e.g. partition_worker@3s/5s)",
        ),
        ("kill_child@3/2", "fault 'kill_child@3/2': kill_child takes no duration (only partition_worker does)"),
        (
            "kill_worker@2:0",
            "fault 'kill_worker@2:0': the target must be N (the run's Nth worker host, from 1) or all, got '0'",
        ),
        (
            "kill_worker@2:x",
            "fault 'kill_worker@2:x': the target must be N (the run's Nth worker host, from 1) or all, got 'x'",
        ),
        (
            "restart_broker@2:2",
            "fault 'restart_broker@2:2': restart_broker strikes the run's broker, it takes no :TARGET "
            "(only the kinds that strike a worker host or a broker node do)",
        ),
        (
            "kill_broker_node@2:all",
            "fault 'kill_broker_node@2:all': the target must be N (the Nth node of the run's "
            "cluster, from 1), got 'all'",
        ),
        (
            3,
            "fault must be none or KIND@TIME[/DURATION][:TARGET] (KIND one of kill_child, kill_worker, term_worker, "
            "restart_broker, "
            "partition_worker, failover_broker, kill_broker_node), got 3",
        ),
    ],
)
def test_a_bad_fault_is_one_line_at_its_value(tmp_path, value, message):
    import json

    path = write(tmp_path, f"matrix:\n  fault: [none, {json.dumps(value)}]\n")
    assert problems(path) == [f"{path}:4:{len('  fault: [none, ') + 1}: {message}"]


def test_cells_hold_the_canonical_fault(tmp_path):
    exp = load_experiment(
        write(tmp_path, "matrix:\n  fault: [none, kill_child@3s, 'kill_worker@1+kill_child@250ms']\n")
    )
    assert [c.values["fault"] for c in expand(exp)] == ["none", "kill_child@3", "kill_child@0.25+kill_worker@1"]


def test_kill_child_is_refused_for_a_pool_without_child_processes(tmp_path):
    path = write(tmp_path, "matrix:\n  pool: [prefork, threads]\n  fault: [none, kill_child@1]\n")
    assert problems(path) == [
        f"{path}:5:17: fault kill_child@1: kill_child kills a pool child process, which only "
        "the prefork pool has (this cell's pool is threads)"
    ]
    load_experiment(write(tmp_path, "fixed: {pool: prefork}\nmatrix:\n  fault: [kill_child@1]\n"))  # fine


def test_failover_broker_only_on_a_sentinel_set(tmp_path):
    path = write(tmp_path, "matrix:\n  broker: [redis, redis-sentinel]\n  fault: [none, failover_broker@1]\n")
    assert problems(path) == [
        f"{path}:5:17: fault failover_broker@1: failover_broker fails a Redis Sentinel set's "
        "master over, which only a redis-sentinel broker has (this cell's broker is redis)"
    ]


def broker_problem(values, provisioned, disposable, place_problem=None):
    """The inventory's word on the cell's broker (the worker host reached over SSH)."""
    service = {"redis": "redis", "rabbitmq": "rabbitmq"}[values["broker"]]
    return hosts_problem(values, faults.HostsView(service, provisioned, disposable, place_problem, "w1", lambda: False))


def test_restart_broker_only_on_a_broker_cmx_owns():
    for broker in ("redis", "rabbitmq"):
        cell = {"broker": broker, "fault": "restart_broker@2"}
        assert broker_problem(cell, provisioned=True, disposable=False) is None
        assert broker_problem(cell, provisioned=False, disposable=True) is None
        assert "not one the sweep provisions" in broker_problem(cell, provisioned=False, disposable=False)
        assert broker_problem({"broker": broker, "fault": "kill_child@1"}, provisioned=False, disposable=False) is None
    told = broker_problem(
        {"broker": "rabbitmq", "fault": "restart_broker@2"},
        provisioned=False,
        disposable=True,
        place_problem="give rabbitmq_base_dir on brokers host b1 (...)",
    )
    assert told.startswith(
        "fault restart_broker: the rabbitmq broker is marked cmx_disposable but cmx cannot "
        "restart it: give rabbitmq_base_dir on brokers host b1"
    )


def test_a_disposable_broker_must_say_where_it_lives():
    """A disposable broker given by URL is restarted where the inventory says its files are."""
    from cmx.workloads.servers import registry as servers

    redis, rabbit = servers.get("redis"), servers.get("rabbitmq")
    with pytest.raises(ValueError, match="^give redis_dir on brokers host b1 "):
        redis.place_of("b1", {}, provisioned=False)
    assert redis.place_of("b1", {"redis_dir": "/srv/r"}, provisioned=False) == {"dir": "/srv/r", "unit": "cmx-redis-b1"}
    assert redis.place_of("b1", {"redis_dir": "/srv/r"}, provisioned=True) == {"unit": "cmx-redis-b1"}  # the workdir's
    with pytest.raises(ValueError, match="^give rabbitmq_base_dir and rabbitmq_nodename on brokers host b1 "):
        rabbit.place_of("b1", {}, provisioned=False)
    assert rabbit.place_of("b1", {"rabbitmq_base_dir": "/srv/q", "rabbitmq_nodename": "q@b1"}, provisioned=False) == {
        "dir": "/srv/q",
        "node": "q@b1",
        "env": {},
    }


def test_a_provisioned_rabbitmq_is_found_where_its_role_lays_it_out():
    """place_of's defaults are roles/rabbitmq's (rendered as Ansible would for host a.b)."""
    import re

    import yaml

    from cmx.engine.paths import ROLES
    from cmx.workloads.servers import registry as servers

    defaults = yaml.safe_load((ROLES / "rabbitmq" / "defaults" / "main.yml").read_text())
    env = yaml.safe_load((ROLES / "rabbitmq" / "vars" / "main.yml").read_text())["__rabbitmq_env_node"]
    assert env["RABBITMQ_DIST_PORT"] == "{{ rabbitmq_dist_port }}"
    render = {
        "{{ inventory_hostname }}": "a.b",
        "{{ rabbitmq_port | int + 20000 }}": "25673",
        "{{ inventory_hostname | regex_replace('[^A-Za-z0-9_-]', '-') }}": "a-b",
    }
    want = {
        k: re.sub(r"\{\{.*?\}\}", lambda m: render[m.group(0)], str(defaults[k]))
        for k in ("rabbitmq_base_dir", "rabbitmq_nodename", "rabbitmq_dist_port")
    }
    got = servers.get("rabbitmq").place_of("a.b", {"rabbitmq_port": 5673}, provisioned=True)
    assert got == {
        "dir": want["rabbitmq_base_dir"],
        "node": want["rabbitmq_nodename"],
        "env": {"RABBITMQ_DIST_PORT": want["rabbitmq_dist_port"]},
    }


def test_settle_and_fault_restart_are_limits_with_defaults(tmp_path):
    exp = load_experiment(write(tmp_path, ""))
    assert (exp.limits.settle, exp.limits.fault_restart) == (10.0, 1.0)
    exp = load_experiment(write(tmp_path, "limits: {settle: 2s, fault_restart: 500ms}\n"))
    assert (exp.limits.settle, exp.limits.fault_restart) == (2.0, 0.5)


def _fault_run(
    con,
    run_id: str,
    after: list[float],
    lost: int = 0,
    end: float | None = None,
    names=("fault_at_s", "stall_s", "recovery_s"),
) -> dict:
    """A run finishing a task every second from T0+1 to T0+5, a fault struck at T0+5.5 (the clock
    started at T0+0.2), then tasks finishing at ``after`` (seconds from T0), ``lost`` tasks never
    finishing, the drive ending at ``end`` (seconds from T0); its fault metrics."""
    from cmx.engine.results import db
    from tests.results_fixture import T0, add_run

    tasks = [(f"a{i}", T0, T0 + i, T0 + i + 1, "SUCCESS") for i in range(5)]
    tasks += [(f"b{i}", T0, T0 + s - 0.5, T0 + s, "SUCCESS") for i, s in enumerate(after)]
    tasks += [(f"l{i}", T0, None, None, "LOST") for i in range(lost)]
    add_run(con, "e", run_id, {"fault": "kill_worker@5"}, tasks=tasks)
    con.execute(
        "INSERT INTO faults (run_id, idx, fault, kind, host, struck_at, clock_at, clock_host, drive_end_at) "
        "VALUES (?, 0, 'kill_worker@5', 'kill_worker', 'w1', ?, ?, 'w1', ?)",
        [run_id, T0 + 5.5, T0 + 0.2, None if end is None else T0 + end],
    )
    got = dict(con.execute(db.sql("metrics.sql"), {"run_id": run_id, "warmup_s": 0}).fetchall())
    return {k: got[k] for k in names}


def test_a_stall_no_completion_ended_runs_to_the_runs_end(tmp_path):
    """Issue 39: tasks lost and nothing finishing again is a stall to the run's end, censored, never
    recovered; not the longest gap between the few completions after the fault."""
    from cmx.engine.results import db

    every = ("stall_s", "stall_censored", "recovery_s")
    with db.connect(tmp_path / "s.duckdb") as con:
        # the tasks in hand finish within 0.3 s of the fault, then nothing for 20 s with 17 lost
        held = _fault_run(con, "h", [5.7, 6.0, 6.3], lost=17, end=26.3, names=every)
        assert held == pytest.approx({"stall_s": 20.0, "stall_censored": 1, "recovery_s": None})
        # nothing at all after the fault: the stall is the fault to the run's end
        none = _fault_run(con, "n", [], lost=5, end=15.5, names=every)
        assert none == pytest.approx({"stall_s": 10.0, "stall_censored": 1, "recovery_s": None})
        # a long stall a completion ended, then lost tasks and a shorter tail: not censored
        ended = _fault_run(con, "e", [30 + k for k in range(12)], lost=2, end=46.0, names=every)
        assert ended == pytest.approx({"stall_s": 24.5, "stall_censored": 0, "recovery_s": 32.5})
        # every task finished: the tail after the last completion is no stall
        done = _fault_run(con, "d", [9 + k * 0.5 for k in range(43)], end=60.0, names=every)
        assert done == pytest.approx({"stall_s": 3.5, "stall_censored": 0, "recovery_s": 11.0})
        # tasks unfinished and the run's end unknown (no driver.json): the stall is unknown
        unknown = _fault_run(con, "u", [5.7], lost=3, names=every)
        assert unknown == {"stall_s": None, "stall_censored": None, "recovery_s": None}


def test_fault_metrics_have_exact_values(tmp_path):
    from cmx.engine.results import db

    with db.connect(tmp_path / "f.duckdb") as con:
        # back at 0.9/s... from 9 s, two a second: the window is ten pre-fault completions (11 s);
        # the first whole window after the fault holding 90 % of them ends at 16.5 s
        back = _fault_run(con, "r1", [9 + k * 0.5 for k in range(43)])
        assert back == pytest.approx({"fault_at_s": 5.3, "stall_s": 3.5, "recovery_s": 11.0})
        # nothing finished after the fault: no stall measured, never recovered
        assert _fault_run(con, "r2", []) == pytest.approx({"fault_at_s": 5.3, "stall_s": None, "recovery_s": None})
        # finishing again, but at half the pre-fault rate: never recovered
        slow = _fault_run(con, "r3", [8 + k * 2.2 for k in range(10)])
        assert slow["recovery_s"] is None and slow["stall_s"] == pytest.approx(2.5)
        # the tasks in hand finish at the pre-fault rate for 11 s, then nothing for 23 s, then back
        # at that rate: recovered only after the stall (the first whole window after it, 48 s),
        # not when the tasks in hand were done (17 s)
        burst = _fault_run(con, "r5", [6 + k for k in range(12)] + [40 + k for k in range(20)])
        assert burst == pytest.approx({"fault_at_s": 5.3, "stall_s": 23.0, "recovery_s": 42.5})
        # no fault, no fault metrics
        from tests.results_fixture import T0, add_run

        add_run(con, "e", "r4", {}, tasks=[("x", T0, T0, T0 + 1, "SUCCESS")])
        names = {n for n, _ in con.execute(db.sql("metrics.sql"), {"run_id": "r4", "warmup_s": 0}).fetchall()}
        assert not names & {"fault_at_s", "stall_s", "recovery_s"}


def test_the_rate_over_time_chart_marks_each_fault_where_it_struck():
    from cmx.analysis import charts

    rows = [
        {"run": run, "second": s, "width_s": 1.0, "completed": 2, "rate": 2.0, "queue_depth": 0}
        for run in ("a #1", "b #1")
        for s in range(5)
    ]
    spec = charts.rate_over_time(rows, "t", [{"run": "a #1", "second": 2.5, "fault": "kill_child@2"}]).to_dict()
    panels = spec["concat"]
    marks = [
        [(layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]) for layer in p["layer"]]
        for p in panels
    ]
    assert marks == [["area", "line", "rule"], ["area", "line"]]  # only the fault run's panel has the rule
    rule = panels[0]["layer"][2]
    assert rule["data"]["values"] == [{"run": "a #1", "second": 2.5, "fault": "kill_child@2"}]


def test_detect_s_is_when_a_worker_first_noticed_its_broker_gone(tmp_path):
    """Issue 39: detect_s is the first "Connection to broker lost" of a worker after the fault
    (a reconnect before it is another story), NULL when no worker noticed."""
    from cmx.engine.results import db
    from tests.results_fixture import T0

    with db.connect(tmp_path / "d.duckdb") as con:
        con.executemany(
            "INSERT INTO broker_lost VALUES (?, ?, ?, ?)",
            [("k", "w1", 7, T0 + 3.0), ("k", "w1", 7, T0 + 20.0), ("k", "w2", 9, T0 + 17.25)],
        )
        assert _fault_run(con, "k", [30], names=("detect_s",)) == pytest.approx({"detect_s": 11.75})
        assert _fault_run(con, "q", [30], names=("detect_s",)) == {"detect_s": None}


def test_a_fault_cells_summary_leads_with_delivery():
    from cmx.analysis.summary import cell_headlines
    from cmx.engine.model.cells import Cell
    from cmx.engine.results.metricdefs import FAULT_HEADLINE
    from cmx.workloads.catalog import registry

    workload = registry.get("concurrent_sleep")
    plain, faulted = Cell("c1", {"fault": "none"}), Cell("c2", {"fault": "kill_child@1"})
    union, shown = cell_headlines(workload, [plain, faulted])
    assert union[: len(FAULT_HEADLINE)] == FAULT_HEADLINE
    assert shown[faulted.cell_id][: len(FAULT_HEADLINE)] == FAULT_HEADLINE
    assert shown[plain.cell_id] == workload.headline_metrics


def test_a_cell_without_faults_keeps_the_id_it_had_before_the_fault_dimension(tmp_path):
    """Cells stored before `fault` existed (resume, trend, compare by cell) keep their ids."""
    import hashlib

    from cmx.engine.model.cells import canonical, cell_id
    from cmx.engine.model.dimensions import normalise_values

    (plain,) = expand(load_experiment(write(tmp_path, "fixed: {pool: threads}\n")))
    before = {
        k: v for k, v in plain.values.items() if k not in ("fault", "drivers", "queue_type", "delivery_limit")
    }  # as 0.2.0 held them
    old = hashlib.sha256(
        canonical({"workload": "concurrent_sleep", "values": normalise_values("concurrent_sleep", before)}).encode()
    ).hexdigest()[:12]
    assert plain.values["fault"] == "none" and plain.cell_id == old
    assert cell_id("concurrent_sleep", {**before, "fault": "kill_worker@1"}) != old


def test_a_fault_run_that_never_recovered_reads_never_in_the_summary_and_the_report(tmp_path):
    """recovery_s stored NULL in a fault run is "never" (the summary table, the report's table);
    a run without a fault has no recovery row at all and shows no such word."""
    from cmx.analysis import page, report_cells, views
    from cmx.analysis.summary import with_interval
    from cmx.engine.results import db
    from tests.results_fixture import add_run

    assert with_interval("recovery_s", None, ok=3, missing=3).plain == "never"
    assert "2 never" in with_interval("recovery_s", _summary([4.0]), ok=3, missing=2).plain
    assert with_interval("stall_s", None, ok=3, missing=3).plain == "no value"  # not every NULL is never
    path = tmp_path / "n.duckdb"
    with db.connect(path) as con:
        db.record_sweep(con, "s1", "e", "e.yaml", "throughput", "", "inv", {}, {"revision": 1}, planned=2)
        add_run(
            con,
            "e",
            "f1",
            {"fault": "restart_broker@2"},
            metrics={"fault_at_s": 2.0, "stall_s": 12.0, "stall_censored": 1, "recovery_s": None},
        )
        add_run(con, "e", "p1", {"fault": "none"}, metrics={"consume_rate": 10.0})
    with views.connect(path, read_only=True) as con:
        metrics = report_cells.table_metrics(con, "e")
        assert "recovery_s" in metrics and "stall_censored" in metrics  # a fault experiment's table leads with them
        cells = report_cells.cells_of(con, "e", 1, ["fault"], metrics)
    html = page.summary_table(cells, ["fault"], metrics)
    by_fault = {c["fault"]: c for c in cells}
    assert by_fault["restart_broker@2"]["never"] == {"recovery_s": 1} and "never" not in by_fault["none"]
    assert html.count(">never<") == 1, html


def _summary(values):
    from cmx.analysis import stats

    return stats.summarize(values)


def test_kill_broker_node_strikes_a_node_of_a_cluster_only():
    from cmx.engine.model.faultcheck import cell_problem

    (fault,) = faults.parse("kill_broker_node@2s:3")
    assert (fault.kind, fault.target, fault.host, fault.text()) == (
        "kill_broker_node",
        "broker",
        3,
        "kill_broker_node@2:3",
    )
    assert fault.definition.downs_workers and fault.definition.cuts_off and fault.definition.needs_place
    assert faults.DOWNS_WORKERS == ("kill_broker_node",)
    assert cell_problem({"broker": "rabbitmq-cluster", "fault": "kill_broker_node@2:3", "machines": 1}) is None
    assert cell_problem({"broker": "rabbitmq", "fault": "kill_broker_node@2"}) == (
        "fault kill_broker_node@2: kill_broker_node kills a node of a RabbitMQ cluster, which only a "
        "rabbitmq-cluster broker has (this cell's broker is rabbitmq)"
    )


def test_kill_broker_node_goes_to_the_host_of_the_node_it_names():
    from cmx.engine.run.faultrun import FaultScheduler

    nodes = [{"host": h, "name": f"n{i}"} for i, h in enumerate(("b1", "b2", "b3"), 1)]
    sched = FaultScheduler(
        None,
        "r1",
        (),
        "d",
        ("w1",),
        {"broker": "b1", "driver": "d"},
        0.0,
        1.0,
        1.0,
        broker={"service": "rabbitmq_cluster", "nodes": nodes},
    )
    (second,) = faults.parse("kill_broker_node@2:2")
    assert sched.hosts_of(second) == ("b2",)
    assert sched._broker_part(second) == {"service": "rabbitmq_cluster", "node": nodes[1]}
    (fourth,) = faults.parse("kill_broker_node@2:4")
    with pytest.raises(ValueError, match="strikes node 4 of the run's broker, which has 3 the sweep provisioned"):
        sched.hosts_of(fourth)
    (restart,) = faults.parse("restart_broker@2")
    assert sched.hosts_of(restart) == ("b1",) and "node" not in sched._broker_part(restart)

"""One metric registry (engine/results/metricdefs.py): every metric cmx can store is declared there,
and summary, compare, report, the views and the CLI name only metrics it declares."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from cmx.analysis import report, views
from cmx.analysis.compare import compare, parse_selection
from cmx.analysis.summary import cell_headlines
from cmx.engine.plan.matrix import Cell
from cmx.engine.results import db, metricdefs
from cmx.engine.results.metricdefs import METRICS
from cmx.workloads.catalog import registry
from cmx.workloads.vocab.clientname import CLIENTS, TARGETS
from cmx.workloads.vocab import metrics as vocab_metrics
from tests.results_fixture import T0, add_run, build_matrix

REPO = Path(__file__).resolve().parents[2]


def _metrics_sql_names(tmp_path) -> set[str]:
    """Every name sql/metrics.sql produces over a run that has something of every kind: tasks of
    the mixed workload (short and long), samples of every process role (worker children too),
    connections of every client to every target, a queue depth."""
    path = tmp_path / "m.duckdb"
    tasks = [(f"t{i}", T0 + i, T0 + i + 0.1, T0 + i + 0.5, "SUCCESS") for i in range(6)]
    samples = [
        ("h1", 10 + k, role, T0 + s, 100 + s, 50 + s)
        for k, role in enumerate(("worker", "worker-child", "sampler", *metricdefs.PROCESS_ROLES))
        for s in (1, 2)
    ]
    with db.connect(path) as con:
        add_run(con, "e", "r1", {"pool": "prefork"}, tasks=tasks, samples=samples, queue_depth=[(T0 + 1, 3)])
        con.execute(
            "UPDATE tasks SET name = CASE WHEN task_id IN ('t0', 't1') THEN 'cmx.mixed.long' "
            "WHEN task_id = 't5' THEN 'cmx.concurrent_sleep.sleep' ELSE 'cmx.mixed.short' END"
        )
        con.execute("INSERT INTO peaks VALUES ('r1', 'h1', 10, 'worker', 'celery', 500)")
        con.execute("INSERT INTO sample_marks VALUES ('r1', 'h1', 'clock', ?), ('r1', 'h1', 'drain', ?)", [T0, T0 + 3])
        con.execute(
            "INSERT INTO faults (run_id, idx, fault, kind, host, struck_at, clock_at, clock_host) "
            "VALUES ('r1', 0, 'kill_child@2', 'kill_child', 'h1', ?, ?, 'h1')",
            [T0 + 2.5, T0],
        )
        for target in TARGETS:
            for client in CLIENTS:
                con.execute(
                    "INSERT INTO connections (run_id, host, role, kind, ts, count, client) "
                    "VALUES ('r1', 'b1', ?, 'redis', ?, 2, ?)",
                    [target, T0 + 1, client],
                )
        got = {name for name, _ in con.execute(db.sql("metrics.sql"), {"run_id": "r1", "warmup_s": 0}).fetchall()}
    return got


def test_every_metric_metrics_sql_can_produce_is_declared(tmp_path):
    produced = _metrics_sql_names(tmp_path)
    literal = set(re.findall(r"SELECT '([a-z0-9]+_[a-z0-9_]+)',", db.sql("metrics.sql")))
    assert literal <= produced  # the fixture reaches every row of the file
    assert {
        "peak_pss_bytes_worker",
        "backend_connections_driver_max",
        "peak_rss_per_slot_bytes",
        "short_delayed_share",
    } <= produced  # ...and the rows whose names are built in SQL
    assert sorted(produced - set(METRICS)) == []


def test_every_metric_a_workload_or_ingest_reports_is_declared():
    """ctx.metric(...) in the catalog and drivers, and what ingest adds itself."""
    sources = [*REPO.glob("workloads/**/*.py"), *REPO.glob("engine/**/*.py")]
    # A name as the code writes it: a literal, or read from the vocabulary (M.NAME, M.family(p)).
    name = r"(\"[a-z0-9_]+\"|M\.[A-Z0-9_]+|M\.[a-z_]+\(\d+\))"
    reported = set()
    for path in sources:
        text = path.read_text()
        written = re.findall(r"ctx\.metric\(\s*" + name, text)
        written += re.findall(r"\(" + name + r", [^()]*?, \"[a-z/%]*\"\)\]", text)  # ingest's own
        reported |= {eval(w, {"M": vocab_metrics}) for w in written}  # noqa: S307 (the test's own source)
        reported |= set(re.findall(r"INSERT INTO metrics VALUES \(\?, '([a-z0-9_]+)'", text))
    assert {"request_p50_s", "drained_rate", "sampler_cpu_percent", "harness_overhead_s"} <= reported
    assert sorted(reported - set(METRICS)) == []


def test_units_come_from_the_registry_not_the_reporter():
    assert metricdefs.unit_of("consume_rate", "bogus") == "tasks/s"
    assert metricdefs.unit_of("my_own_metric", "widgets") == "widgets"  # a user workload's own
    assert metricdefs.get("my_wait_s").unit == "s" and metricdefs.get("my_wait_s").better is metricdefs.Better.NEITHER


def test_every_headline_is_declared():
    """What summary (cmx run), report and compare show for each built-in workload."""
    for name in registry.names():
        w = registry.get(name)
        assert sorted(set(w.headline_metrics) - set(METRICS)) == [], name
        assert sorted(set(w.headline(w.Params.model_construct())) - set(METRICS)) == [], name
    for names in (metricdefs.RUN_SUMMARY_COLUMNS, metricdefs.FACTS, report.CHARTED):
        assert sorted(set(names) - set(METRICS)) == []


def test_run_summary_sql_is_generated_from_the_registry():
    committed = (views.SQL_DIR / "run_summary.sql").read_text()
    assert committed == views.generated_run_summary(), "run `python -m cmx.analysis.views` to regenerate it"
    columns = re.findall(r"AS ([a-z0-9_]+),?\n", committed.split("END metric columns")[0])
    assert tuple(columns) == metricdefs.RUN_SUMMARY_COLUMNS


#: Metric-shaped: how every metric family's names end or begin (a misspelt metric matches too).
_METRIC_SHAPED = re.compile(
    r"^([a-z0-9_]+_(rate|bytes|max|share)|[a-z_]+_p\d+_s|tasks_[a-z]+"
    r"|peak_[a-z_]*bytes[a-z_]*)$"
)
#: A metric named in SQL: ``name = 'x'`` (metrics.name; not table_name, view_name…).
_IN_SQL = re.compile(r"(?<![a-z_])name\s*(?:=|<>)\s*'([a-z0-9_]+)'")


def _named_metrics(path: Path) -> set[str]:
    if path.suffix == ".sql":
        return set(_IN_SQL.findall(path.read_text()))
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _METRIC_SHAPED.match(node.value):
                found.add(node.value)
            found |= set(_IN_SQL.findall(node.value))
    return found


@pytest.mark.parametrize("folder", ["analysis", "analysis/sql", "cli"])
def test_summary_compare_report_views_and_cli_name_only_declared_metrics(folder):
    named = set()
    for path in sorted((REPO / folder).glob("*.[ps][yq]*")):
        named |= _named_metrics(path)
    assert named, folder  # the scan sees the names it checks
    assert sorted(named - set(METRICS)) == []


def test_compare_table_metrics_and_summary_show_only_declared_metrics(tmp_path):
    path = build_matrix(tmp_path / "r.duckdb")
    with db.connect(path) as con:  # a metric no registry entry declares, stored by some other tool
        con.execute("INSERT INTO metrics SELECT run_id, 'undeclared_rate', 1, '' FROM runs")
    with views.connect(path, read_only=True) as con:
        res = compare(
            con,
            parse_selection("exp:broker=redis,pool=threads,concurrency=4"),
            parse_selection("exp:broker=rabbitmq,pool=threads,concurrency=4"),
        )
        shown = report.table_metrics(con, "exp")
    assert res.metrics and {m.metric for m in res.metrics} <= set(METRICS)
    assert shown and set(shown) <= set(METRICS)
    headline, _ = cell_headlines(registry.get("throughput"), [Cell("c", {"params.mode": "stream"})])
    assert headline and set(headline) <= set(METRICS)


def test_results_never_import_analysis():
    """Analysis depends on results, never the reverse."""
    for path in (REPO / "engine" / "results").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("cmx.analysis"), path
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("cmx.analysis") for a in node.names), path

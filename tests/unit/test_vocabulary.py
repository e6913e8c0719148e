"""A pool, server or metric name is written once, in the vocabulary (workloads/vocab/), and read
from there (issue 27): a string literal equal to one of them anywhere else in engine/, workloads/
or analysis/ fails this test. Docstrings and comments are prose and do not count; SQL lives in
.sql files or inside longer strings, which never equal a name."""
from __future__ import annotations

import ast
from pathlib import Path

from cmx.engine.results.metricdefs import METRICS
from cmx.workloads.vocab import metrics, pools, services

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("engine", "workloads", "analysis")
#: Where the names are written: the vocabulary itself.
REGISTRIES = ("workloads/vocab/",)
#: Literals that equal a name but are something else, each with why.
ALLOWED = {
    ("workloads/kinds.py", "redis"): "a URL scheme (redis://) in SERVICES' scheme table",
    ("workloads/kinds.py", "postgres"): "a URL scheme (postgres://) in SERVICES' scheme table",
    ("workloads/fingerprint.py", "redis"): "the redis-py distribution whose version is recorded",
    ("workloads/servers/postgresql.py", "postgres"): "the operating-system user pg_ctl runs as",
    ("workloads/host/hostctl.py", "clock_uncertainty_s"): "a host fact: the hosts table's column",
    ("engine/results/ingest.py", "clock_uncertainty_s"): "a host fact: the hosts table's column",
}
NAMES = {**{p: "pool" for p in pools.POOLS}, **{s: "server" for s in services.SERVICE_NAMES},
         **{m: "metric" for m in METRICS}}


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def literals(source: str) -> list[tuple[int, str]]:
    """(line, value) of every string constant that is not a docstring."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs)


def test_the_scan_sees_a_name_written_as_a_literal_and_not_a_docstring():
    source = '"""consume_rate in a docstring."""\nx = {"pool": "gevent", "m": M.CONSUME_RATE}  # "redis"\n'
    assert [v for _, v in literals(source) if v in NAMES] == ["gevent"]


def test_every_metric_of_the_registry_is_named_by_the_vocabulary():
    named = {v for k, v in vars(metrics).items() if k.isupper() and isinstance(v, str)}
    named |= {f(p) for f in (metrics.latency, metrics.queue_wait, metrics.service_time, metrics.request)
              for p in metrics.PERCENTILES}
    named |= set(metrics.ROLE_PEAKS) | set(metrics.CLIENT_CONNECTIONS)
    assert set(METRICS) <= named, sorted(set(METRICS) - named)


def test_no_pool_server_or_metric_name_is_written_outside_the_vocabulary():
    found, used = [], set()
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel.startswith(REGISTRIES):
                continue
            for line, value in literals(path.read_text()):
                if value not in NAMES:
                    continue
                if (rel, value) in ALLOWED:
                    used.add((rel, value))
                else:
                    found.append(f"{rel}:{line}: the {NAMES[value]} name {value!r} (read it from workloads/vocab/)")
    assert not found, "\n".join(found)
    assert used == set(ALLOWED), f"stale ALLOWED entries: {sorted(set(ALLOWED) - used)}"

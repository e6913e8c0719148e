"""A pool, server or metric name is written once, in the vocabulary (workloads/vocab/), and read
from there (issue 27): a string literal equal to one of them anywhere else in engine/, workloads/
or analysis/ fails this test. Docstrings and comments are prose and do not count; SQL lives in
.sql files or inside longer strings, which never equal a name.

The controller names no server at all (issue 41): in engine/ no identifier, import or
identifier-like string (no spaces: a variable, a key, a URL) carries a server's name, one of
its URL schemes or its product's name; it asks the servers' registry
(workloads/servers/registry.py) and calls their hooks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from cmx.engine.results.metricdefs import METRICS
from cmx.workloads.servers.registry import SERVERS
from cmx.workloads.vocab import metrics, pools, services

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("engine", "workloads", "analysis")
#: Where the names are written: the vocabulary itself.
REGISTRIES = ("workloads/vocab/",)
#: Literals that equal a name but are something else, each with why.
ALLOWED = {
    ("workloads/servers/redis.py", "redis"): "a URL scheme (redis://) in the server's scheme table",
    ("workloads/servers/postgresql.py", "postgres"): "a URL scheme (postgres://) in the server's scheme table, "
    "and the operating-system user pg_ctl runs as",
    ("workloads/host/hostctl.py", "clock_uncertainty_s"): "a host fact: the hosts table's column",
    ("engine/results/ingest.py", "clock_uncertainty_s"): "a host fact: the hosts table's column",
}
NAMES = {
    **{p: "pool" for p in pools.POOLS},
    **{s: "server" for s in services.SERVICE_NAMES},
    **{m: "metric" for m in METRICS},
}


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def literals(source: str) -> list[tuple[int, str]]:
    """(line, value) of every string constant that is not a docstring."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return sorted(
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    )


def test_the_scan_sees_a_name_written_as_a_literal_and_not_a_docstring():
    source = '"""consume_rate in a docstring."""\nx = {"pool": "gevent", "m": M.CONSUME_RATE}  # "redis"\n'
    assert [v for _, v in literals(source) if v in NAMES] == ["gevent"]


def test_every_metric_of_the_registry_is_named_by_the_vocabulary():
    named = {v for k, v in vars(metrics).items() if k.isupper() and isinstance(v, str)}
    named |= {
        f(p)
        for f in (metrics.latency, metrics.queue_wait, metrics.service_time, metrics.request)
        for p in metrics.PERCENTILES
    }
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


# -- the controller names no server ---------------------------------------------------------------
#: Word parts of a scheme that name no server (``db+postgresql``).
GENERIC_WORDS = {"db"}
#: Short forms code uses for a server besides its names (``rabbit_used``, ``RabbitApiProbe``).
SHORT_FORMS = {"rabbit", "pg", "psycopg", "psycopg2", "pika", "kombu_redis"}
#: What names a server, from its registry: its name's words, its schemes' and its product's.
SERVER_WORDS = (
    frozenset(
        {w for s in SERVERS.values() for w in s.name.split("_")}
        | {w for s in SERVERS.values() for scheme in s.schemes for w in re.split(r"[^a-z0-9]+", scheme) if w}
        | {w for s in SERVERS.values() for w in s.product.lower().split()}
        | SHORT_FORMS
    )
    - GENERIC_WORDS
)
#: Modules of workloads/servers/ the controller may import: the registry and what all servers share.
SHARED_SERVER_MODULES = {"cmx.workloads.servers.registry", "cmx.workloads.servers.base", "cmx.workloads.servers.probes"}
#: (file, text) in engine/ that names a server and why it may (none: keep it so).
ENGINE_ALLOWED: dict[tuple[str, str], str] = {}


def _words(text: str) -> set[str]:
    """The lower-case words of an identifier or token: split at non-alphanumerics and camel humps."""
    return {
        w.lower()
        for part in re.split(r"[^A-Za-z0-9]+", text)
        for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", part)
    } | {text.lower()}


def server_mentions(source: str) -> list[tuple[int, str]]:
    """(line, text) of every identifier, import and identifier-like string constant (not a
    docstring, no whitespace) of ``source`` that names a server."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Name):
            texts = [node.id]
        elif isinstance(node, ast.Attribute):
            texts = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            texts = [node.name]
        elif isinstance(node, ast.arg):
            texts = [node.arg]
        elif isinstance(node, ast.keyword) and node.arg:
            texts = [node.arg]
        elif isinstance(node, ast.alias):
            texts = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            texts = [module] + [f"{module}.{a.name}" for a in node.names if module == "cmx.workloads.servers"]
        elif isinstance(node, ast.Import):
            texts = [a.name for a in node.names]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
            and not re.search(r"\s", node.value)
        ):
            texts = [node.value]
        for text in texts:
            specific = (
                text.startswith("cmx.workloads.servers.")
                and text not in SHARED_SERVER_MODULES
                and not any(text.startswith(m + ".") for m in SHARED_SERVER_MODULES)
            )
            if _words(text) & SERVER_WORDS or specific:
                found.append((node.lineno, text))
    return sorted(set(found))


def test_the_server_scan_sees_names_imports_and_keys_and_not_prose():
    planted = (
        '"""Redis and rabbitmq in a docstring."""\n'
        "from cmx.workloads.servers import redis_sentinel as sentinel\n"
        "from cmx.workloads.servers import kafka\n"
        "from cmx.workloads.servers import registry as servers\n"
        "from cmx.workloads.vocab.services import RABBITMQ\n"
        "def rabbit_api_probe(inv):\n"
        "    api = inv.hostvars.get('rabbitmq_api_url')  # redis in a comment\n"
        "    env = {'CMX_RABBITMQ_API': api, 'amqp': 1}\n"
        "    return servers.get(inv.service).secrets(inv), 'a Redis broker in a message', RabbitApiProbe\n"
    )
    assert server_mentions(planted) == [
        (2, "cmx.workloads.servers.redis_sentinel"),
        (2, "redis_sentinel"),
        (2, "sentinel"),
        (3, "cmx.workloads.servers.kafka"),
        (5, "RABBITMQ"),
        (6, "rabbit_api_probe"),
        (7, "rabbitmq_api_url"),
        (8, "CMX_RABBITMQ_API"),
        (8, "amqp"),
        (9, "RabbitApiProbe"),
    ]
    assert {"redis", "rabbitmq", "postgres", "postgresql", "sentinel", "amqp"} <= SERVER_WORDS


def test_the_controller_names_no_server():
    """engine/ reaches every server through the registry and its hooks: a server's name, scheme
    or product in an identifier, an import or a key there fails (ENGINE_ALLOWED says why not)."""
    found, used = [], set()
    for path in sorted((ROOT / "engine").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        for line, text in server_mentions(path.read_text()):
            if (rel, text) in ENGINE_ALLOWED:
                used.add((rel, text))
            else:
                found.append(f"{rel}:{line}: {text!r} names a server (ask workloads/servers/registry.py)")
    assert not found, "\n".join(found)
    assert used == set(ENGINE_ALLOWED), f"stale ENGINE_ALLOWED entries: {sorted(set(ENGINE_ALLOWED) - used)}"

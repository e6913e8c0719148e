"""Every YAML block and every `cmx` command line of the documentation is checked (issue 43).

The pages are docs/**/*.md and README.md. A ```yaml block is, by its first line:
- ``# fragment``: keys of an experiment (``fixed:``, ``matrix:``…), merged into a minimal one
  (``name``, ``workload: throughput``) and validated by cmx's experiment loader;
- ``# inventory`` or ``# inventory/NAME.yml``: an Ansible inventory, parsed by cmx's inventory loader;
- ``# not cmx: WHAT``: another tool's file (a CI workflow…): only parsed as YAML;
- anything else: a whole experiment file, validated by the loader (written at the path its first
  line names, ``# experiments/NAME.yaml``, else at experiments/block-N.yaml).
Python blocks whose first line names a path (``# experiments/mytasks.py``) are written beside them
first, so an experiment that names its module or workload class is validated against the code the
page prints.

A ```sql block, and the query of a ``cmx sql`` line, runs on a results database cmx creates
(its tables and views), holding one run whose dimensions are the built-in ones and every
``params.*`` / ``celery.*`` column the pages' SQL names; a block for another database (first line
``-- not the results database: …``) is only parsed.

A command line (in ```console after ``$ ``, in ```sh / ```bash / ```shell each line) that runs
``cmx`` must name a command that exists and parse with that command's options and arguments (click
parses it as ``cmx`` would, without running it); the cheap ones (validate, plan, schema, workloads,
--version) are run and must exit 0, on the repository's files or on the files the page itself
prints (a block whose first line names its path).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from cmx.cli.checks import check_thresholds
from cmx.cli.main import app
from cmx.engine.hosts.inventory import load_inventory
from cmx.engine.model.cells import expand
from cmx.engine.model.load import load_experiment
from tests.conftest import REPO
from tests.results_fixture import add_run

PAGES = sorted(p for p in (REPO / "docs").rglob("*.md") if "hooks" not in p.parts) + [REPO / "README.md"]
FENCE = re.compile(r"^ *```(\w+)[^\n]*\n(.*?)^ *```", re.M | re.S)
SHELLS = {"sh", "bash", "shell", "console"}
FRAGMENT_BASE = {"name": "fragment", "workload": {"name": "throughput"}}
#: Commands cheap enough to run for real (no host, no sweep).
RUN_FOR_REAL = {"validate", "plan", "schema", "workloads"}
#: Versions the package.NAME examples name, as wheels "already on the controller" (their names are
#: all cmx reads), so validating them asks no package index.
KNOWN_WHEELS = ("celery-5.5.3", "celery-5.7.0", "redis-5.3.0")


def _rel(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def blocks(page: Path) -> list[tuple[str, str, int]]:
    """(language, body, line) of every fenced block of a page."""
    text = page.read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


def _first_line(body: str) -> str:
    return body.split("\n", 1)[0].strip()


def _path_named(body: str) -> str | None:
    first = _first_line(body)
    match = re.fullmatch(r"#\s*((?:experiments|inventory)/[\w./-]+\.(?:ya?ml|py))", first)
    return match.group(1) if match else None


YAML_BLOCKS = [(p, body, line) for p in PAGES for lang, body, line in blocks(p) if lang in ("yaml", "yml")]


def test_the_pages_have_blocks_to_check():
    assert len(YAML_BLOCKS) >= 10 and len(COMMANDS) >= 30, (len(YAML_BLOCKS), len(COMMANDS))


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    cache = tmp_path / "wheels"
    cache.mkdir()
    for name in KNOWN_WHEELS:
        (cache / f"{name}-py3-none-any.whl").write_bytes(b"")
    monkeypatch.setenv("CMX_PACKAGE_CACHE", str(cache))
    return tmp_path


@pytest.mark.parametrize("page,body,line", YAML_BLOCKS, ids=[f"{_rel(p)}:{n}" for p, _, n in YAML_BLOCKS])
def test_yaml_block_is_valid(page, body, line, workspace):
    where = f"{_rel(page)}:{line}"
    data = yaml.safe_load(body)
    first = _first_line(body)
    if first.startswith("# not cmx:"):
        return
    for lang, other, _ in blocks(page):  # the code the page prints beside it
        named = _path_named(other)
        if lang == "python" and named:
            (workspace / named).parent.mkdir(parents=True, exist_ok=True)
            (workspace / named).write_text(other)
    named = _path_named(body)
    if first.startswith("# inventory") or (named or "").startswith("inventory/"):
        path = workspace / (named or "inventory/block.yml")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        inventory = load_inventory(path, secrets_dir=workspace / "results")
        assert inventory.groups.get("workers"), where
        return
    if first.startswith("# fragment"):
        assert isinstance(data, dict) and not set(data) & {"name", "workload"}, f"{where}: not a fragment"
        body = yaml.safe_dump({**FRAGMENT_BASE, **data}, sort_keys=False)
    path = workspace / (named or f"experiments/block-{line}.yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    experiment = load_experiment(path)
    check_thresholds(experiment)
    assert expand(experiment), f"{where}: no cells"


# --- SQL -------------------------------------------------------------------------------------

SQL_BLOCKS = [(p, body, line) for p in PAGES for lang, body, line in blocks(p) if lang == "sql"]


@pytest.fixture(scope="module")
def results_db(tmp_path_factory):
    """A results database with every table and view, and one run with the columns the pages name."""
    from cmx.analysis import views
    from cmx.workloads.vocab.dimensions import DIMENSIONS

    text = "\n".join(p.read_text() for p in PAGES)
    dims = {d.name: d.default for d in DIMENSIONS}
    dims |= {name: 1 for name in re.findall(r'"((?:params|celery|worker|package)\.[a-z_]+)"', text)}
    path = tmp_path_factory.mktemp("db") / "cmx.duckdb"
    with views.connect(path) as con:
        add_run(con, "quickstart", "r1", dims, metrics={"consume_rate": 1000.0})
    return path


def _statements(sql: str) -> list[str]:
    """The statements of a block (a part holding only comments is none)."""
    parts = [part.strip() for part in sql.split(";")]
    return [p for p in parts if any(line.strip() and not line.strip().startswith("--") for line in p.splitlines())]


@pytest.mark.parametrize("page,body,line", SQL_BLOCKS, ids=[f"{_rel(p)}:{n}" for p, _, n in SQL_BLOCKS])
def test_sql_block_runs_on_a_results_database(page, body, line, results_db):
    from cmx.analysis import views

    if _first_line(body).startswith("-- not the results database"):  # another DuckDB: parsed only
        import duckdb

        parsed = duckdb.connect().execute("SELECT json_serialize_sql(?)", [body]).fetchone()[0]
        assert '"error":false' in parsed, f"{_rel(page)}:{line}: {parsed}"
        return
    with views.connect(results_db, read_only=True) as con:
        for statement in _statements(body):
            try:
                con.execute(statement).fetchall()
            except Exception as exc:  # DuckDB's binder and parser errors
                pytest.fail(f"{_rel(page)}:{line}: {str(exc).splitlines()[0]}")


# --- command lines -----------------------------------------------------------------------------


def _logical_lines(lang: str, body: str) -> list[str]:
    """The shell lines of a block, continuation lines and multi-line quotes joined."""
    lines, pending = [], ""
    for raw in body.splitlines():
        if lang == "console" and not pending:
            if not raw.startswith("$ "):
                continue  # the command's output
            raw = raw[2:]
        pending = f"{pending}\n{raw}" if pending else raw
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the next line continues it
            continue
        lines.append(pending)
        pending = ""
    return lines


def cmx_words(line: str) -> list[str] | None:
    """The words after ``cmx`` of a shell line that runs cmx (None when it does not)."""
    line = re.sub(r"\$\([^)]*\)", "VALUE", line)  # a command substitution is one word
    words = shlex.split(line, comments=True)
    for stop in ("|", "&&", "||", ";", ">", "2>&1"):
        if stop in words:
            words = words[: words.index(stop)]
    if not words or words[0].rsplit("/", 1)[-1] != "cmx":
        return None
    return words[1:]


COMMANDS = [
    (p, n, words)
    for p in PAGES
    for lang, body, n in blocks(p)
    if lang in SHELLS
    for line in _logical_lines(lang, body)
    if (words := cmx_words(line)) is not None
]
GROUP = typer.main.get_command(app)


def _resolve(words: list[str]):
    """The click command the words name, its path and the words left for it."""
    command, path = GROUP, []
    while getattr(command, "commands", None) and words and not words[0].startswith("-"):
        assert words[0] in command.commands, f"no command 'cmx {' '.join([*path, words[0]])}'"
        command, path, words = command.commands[words[0]], [*path, words[0]], words[1:]
    return command, path, words


@pytest.mark.parametrize(
    "page,line,words", COMMANDS, ids=[f"{_rel(p)}:{n}:{' '.join(w[:2]).splitlines()[0][:40]}" for p, n, w in COMMANDS]
)
def test_cmx_command_line_parses(page, line, words, monkeypatch, tmp_path, results_db):
    monkeypatch.chdir(REPO)
    where = f"{_rel(page)}:{line}: cmx {' '.join(words)}"
    command, path, rest = _resolve(words)
    if not path:
        assert rest in (["--version"], ["--help"]), where
        result = CliRunner().invoke(app, rest, prog_name="cmx")
        assert result.exit_code == 0 and result.output.startswith("cmx"), (where, result.output)
        return
    try:
        with command.make_context(" ".join(["cmx", *path]), list(rest), resilient_parsing=False):
            pass
    except Exception as exc:  # click's usage errors: an unknown option, a missing argument, a bad value
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        pytest.fail(f"{where}: {message}")
    if path == ["sql"]:  # on a results database with the pages' columns
        result = CliRunner().invoke(app, [*path, *rest, "--db", str(results_db)], prog_name="cmx")
        assert result.exit_code == 0, (where, result.output)
        return
    if path[0] not in RUN_FOR_REAL or "--out" in rest:
        return
    files = [w for w in rest if w.endswith((".yaml", ".yml"))]
    if not all((REPO / f).is_file() for f in files):  # the page's own files, as it prints them
        printed = {_path_named(body): body for _, body, _ in blocks(page) if _path_named(body)}
        if not all(f in printed for f in files):
            return
        for name, body in printed.items():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(body)
        monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [*path, *rest], prog_name="cmx")
    assert result.exit_code == 0, (where, result.output)

"""The reference pages, written from the code at build time (a MkDocs hook: mkdocs.yml `hooks:`).

A page asks for a part with a marker line, ``<!-- cmx-reference: NAME -->``, which is replaced by
that part: ``cli`` (every command's ``--help``, from the Typer app), ``schema`` (the experiment
file, from ``cmx schema``'s JSON Schema), ``metrics`` (the metric registry,
engine/results/metricdefs.py), ``sql-views`` (the .sql files of analysis/sql and
engine/results/sql) and ``database`` (every table and view of a new results database, with its
columns, as DuckDB describes them). Nothing is copied by hand, so the pages cannot drift from the
code. An unknown marker fails the build.

Run alone, it prints one part: ``.venv/bin/python docs/hooks/gen_reference.py cli``.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

MARKER = re.compile(r"^<!-- cmx-reference: ([a-z-]+) -->$", re.M)
HELP_WIDTH = "100"


def _cell(text) -> str:
    """One Markdown table cell: no newline, no bare pipe."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# --- cli -------------------------------------------------------------------------------------


def command_paths() -> list[list[str]]:
    """Every command of ``cmx`` as its words (``["run"]``, ``["services", "up"]``), in --help order."""
    import typer.main

    from cmx.cli.main import app

    def walk(group, prefix):
        for name, cmd in group.commands.items():
            if getattr(cmd, "commands", None):
                yield from walk(cmd, [*prefix, name])
            else:
                yield [*prefix, name]

    return list(walk(typer.main.get_command(app), []))


def help_text(words: list[str]) -> str:
    """What ``cmx WORDS --help`` prints at 100 columns, without colour or trailing blanks."""
    from typer.testing import CliRunner

    from cmx.cli.main import app

    result = CliRunner().invoke(
        app,
        [*words, "--help"],
        prog_name="cmx",
        color=False,
        env={"COLUMNS": HELP_WIDTH, "NO_COLOR": "1", "TERM": "dumb"},
    )
    if result.exit_code != 0:
        raise RuntimeError(f"cmx {' '.join(words)} --help exited {result.exit_code}: {result.output}")
    return "\n".join(line.rstrip() for line in result.output.strip("\n").splitlines())


def cli() -> str:
    parts = ["## `cmx`", "", "```text", help_text([]), "```", ""]
    for words in command_paths():
        parts += [f"## `cmx {' '.join(words)}`", "", "```text", help_text(words), "```", ""]
    return "\n".join(parts)


# --- schema ----------------------------------------------------------------------------------


def _type(spec: dict) -> str:
    """A short human form of a JSON Schema type: ``integer ≥ 1``, ``one of: redis, rabbitmq``."""
    if "$ref" in spec:
        return spec["$ref"].rsplit("/", 1)[1].replace("cmx_", "")
    if "const" in spec:
        return json.dumps(spec["const"])
    if "enum" in spec:
        return "one of: " + ", ".join(json.dumps(v) if not isinstance(v, str) else v for v in spec["enum"])
    for key in ("anyOf", "oneOf"):
        if key in spec:
            return " or ".join(dict.fromkeys(_type(s) for s in spec[key]))
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list of {_type(spec.get('items', {}))}"
    bounds = [
        f"{sign} {spec[k]}"
        for k, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))
        if k in spec
    ]
    if "pattern" in spec and kind == "string" and not bounds:
        bounds = ["(a duration: `10m`, `5s`, `250ms`)"] if "ms|h|m|s" in spec["pattern"] else []
    return " ".join([kind, *bounds])


def _default(spec: dict) -> str:
    return f"`{json.dumps(spec['default'])}`" if "default" in spec else ""


def _properties(obj: dict, defaults: dict | None = None) -> str:
    """A table of an object's keys; ``defaults`` gives those the schema does not (the dimensions')."""
    defaults = defaults or {}
    rows = [
        [
            f"`{name}`",
            _type(spec),
            _default(spec) or (f"`{json.dumps(defaults[name])}`" if name in defaults else ""),
            spec.get("description", ""),
        ]
        for name, spec in obj.get("properties", {}).items()
    ]
    return _table(["key", "type", "default", "meaning"], rows)


def schema() -> str:
    from cmx.engine.model.schema import experiment_schema
    from cmx.workloads.catalog import registry
    from cmx.workloads.vocab.dimensions import DIMENSIONS

    s = experiment_schema()
    defs = s["$defs"]
    parts = [
        "## Top-level keys",
        "",
        _properties(s),
        "",
        "## `workload`",
        "",
        _properties(defs["WorkloadSpec"]),
        "",
        "## `repeats` as a race",
        "",
        _properties(defs["Racing"]),
        "",
        "## `limits`",
        "",
        defs["Limits"].get("description", ""),
        "",
        _properties(defs["Limits"]),
        "",
        "## Dimensions",
        "",
        "The keys of `fixed`, `matrix`, `zip`, `exclude` and `include`: each built-in dimension, and "
        "the name patterns for workload params, Celery settings, worker switches and package versions "
        "(`matrix` and `zip` take a non-empty list of the value; `exclude` a value or a list of them).",
        "",
        _properties(defs["cmx_fixed"], {d.name: d.default for d in DIMENSIONS}),
        "",
        _table(
            ["key pattern", "type", "meaning"],
            [
                [f"`{p}`", _type(v) if set(v) - {"description"} else "any", v.get("description", "")]
                for p, v in defs["cmx_fixed"]["patternProperties"].items()
            ],
        ),
        "",
    ]
    for name in registry.names():
        ref = registry.WORKLOADS[name].Params.__name__
        parts += [f"## `workload.params` of `{name}`", "", _properties(defs[ref]), ""]
    return "\n".join(parts)


# --- metrics ---------------------------------------------------------------------------------


def metrics() -> str:
    from cmx.engine.results.metricdefs import METRICS, group_of

    rows = [
        [f"`{m.name}`", m.unit, m.better.value, group_of(m.name) if m.group else "", m.label, m.description]
        for m in METRICS.values()
    ]
    return _table(["metric", "unit", "better", "group", "label", "what it measures"], rows)


# --- SQL views and the database --------------------------------------------------------------

_CREATES = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+)?(VIEW|TABLE|MACRO)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I
)


def _header(text: str) -> str:
    """A .sql file's leading comment, as prose."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return " ".join(" ".join(lines).split())


def _root() -> Path:
    """The folder holding engine/ and analysis/ (the checkout, or an install's cmx/)."""
    from cmx.engine import paths

    return Path(paths.__file__).resolve().parent.parent


_ROOT = _root()


def sql_files() -> list[Path]:
    return sorted((_ROOT / "analysis" / "sql").glob("*.sql")) + sorted(
        (_ROOT / "engine" / "results" / "sql").glob("*.sql")
    )


def _columns() -> dict[str, list[tuple[str, str]]]:
    """Every table and view of a results database cmx creates, with its columns and types."""
    from cmx.analysis import views

    with tempfile.TemporaryDirectory() as tmp, views.connect(Path(tmp) / "ref.duckdb") as con:
        rows = con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE NOT internal ORDER BY table_name, column_index"
        ).fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        out.setdefault(table, []).append((column, kind))
    return out


def _column_list(columns: list[tuple[str, str]]) -> str:
    return ", ".join(f"`{c}` {k.lower()}" for c, k in columns)


def sql_views() -> str:
    columns = _columns()
    parts = []
    for path in sql_files():
        text = path.read_text()
        names = [n for kind, n in _CREATES.findall(text) if kind.upper() == "VIEW"]
        if not names:
            continue
        where = path.relative_to(_ROOT).as_posix()
        parts += [f"## `{path.stem}`", "", f"File `{where}`. {_header(text)}", ""]
        parts += [f"- **`{n}`**: {_column_list(columns.get(n, []))}" for n in names] + [""]
    return "\n".join(parts)


def database() -> str:
    columns = _columns()
    return _table(["table or view", "columns"], [[f"`{t}`", _column_list(c)] for t, c in sorted(columns.items())])


PARTS = {"cli": cli, "schema": schema, "metrics": metrics, "sql-views": sql_views, "database": database}


def fill(markdown: str, where: str = "") -> str:
    """The page with every marker replaced by its part."""

    def part(match: re.Match) -> str:
        name = match.group(1)
        if name not in PARTS:
            raise ValueError(f"{where}: unknown reference part {name!r} (known: {', '.join(PARTS)})")
        return PARTS[name]()

    return MARKER.sub(part, markdown)


#: A table row (a line that starts with a pipe) and, in it, a code span.
TABLE_ROW = re.compile(r"^\|.*$", re.M)
CODE_SPAN = re.compile(r"`[^`\n]+`")


def code_pipes(markdown: str) -> str:
    """Table rows with ``\\|`` inside a code span written ``|``: GitHub splits a row at a bare pipe
    even inside code, so the pages escape it; Python-Markdown's tables never split inside code and
    would print the backslash (issue 51: a literal ``\\|`` in the built reference tables)."""

    def row(match: re.Match) -> str:
        return CODE_SPAN.sub(lambda code: code.group(0).replace("\\|", "|"), match.group(0))

    return TABLE_ROW.sub(row, markdown)


def on_page_markdown(markdown: str, page, config, files, **_) -> str:  # the MkDocs hook
    return code_pipes(fill(markdown, page.file.src_path))


if __name__ == "__main__":
    print(PARTS[sys.argv[1]]())

"""The documentation site builds, strictly and quietly, from a checkout (issue 43): the same
`mkdocs build --strict` as `make docs`, into a temporary folder, so CI builds it with the tests.
Its reference pages are generated from the code (docs/hooks/gen_reference.py): every command, every
metric of the registry and every SQL view must be on them. The README stays a landing page."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from cmx.engine.results.metricdefs import METRICS
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "docs" / "hooks"))
import gen_reference  # noqa: E402

README_MAX_LINES = 150


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # as `make docs`
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    noise = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip() and not line.startswith("INFO")]
    assert not noise, noise  # quiet: nothing but mkdocs' INFO lines
    return out


def _text(site, page: str) -> str:
    return re.sub(r"<[^>]+>", "", (site / page / "index.html").read_text())


def test_every_command_has_its_help_on_the_commands_page(site):
    text = _text(site, "reference/cli")
    for words in gen_reference.command_paths():
        assert f"Usage: cmx {' '.join(words)} " in text, words
    assert len(gen_reference.command_paths()) >= 18


def test_every_metric_of_the_registry_is_on_the_metrics_page(site):
    text = _text(site, "reference/metrics")
    assert all(name in text for name in METRICS), [n for n in METRICS if n not in text]


def test_every_sql_view_is_on_the_views_page(site):
    text = _text(site, "reference/sql-views")
    views = [
        n
        for path in gen_reference.sql_files()
        for kind, n in gen_reference._CREATES.findall(path.read_text())
        if kind.upper() == "VIEW"
    ]
    assert {"run_summary", "cell_summary", "task_times"} <= set(views)
    assert all(v in text for v in views), [v for v in views if v not in text]


def test_the_experiment_page_has_every_top_level_key_and_workload(site):
    from cmx.engine.model.schema import experiment_schema
    from cmx.workloads.catalog import registry

    text = _text(site, "reference/experiment-file")
    assert all(k in text for k in experiment_schema()["properties"])
    assert all(f"workload.params of {name}" in text for name in registry.names())


def test_an_unknown_reference_marker_fails_the_build():
    with pytest.raises(ValueError, match="unknown reference part 'nope'"):
        gen_reference.fill("<!-- cmx-reference: nope -->", "x.md")


def test_the_readme_is_a_landing_page_that_starts_with_the_two_commands():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    first_block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["make quickstart", "make test"]
    assert text.index("## Quickstart") < text.index("```sh")


def test_no_literal_backslash_pipe_in_the_built_tables(site):
    """Issue 51: the database, cli, experiment-file and workloads pages showed `\\|` in their tables
    (escaped for GitHub, where a pipe splits a row even inside code; Python-Markdown never does)."""
    pages = ["reference/database", "reference/cli", "reference/experiment-file", "workloads"]
    for page in pages:
        html = (site / page / "index.html").read_text()
        cells = re.findall(r"<td>(.*?)</td>", html, re.S)
        assert cells and not [c for c in cells if "\\|" in c], page
    assert "<code>cmx sql \"QUERY\" [--db PATH] [--format table|csv|json]</code>" in (
        site / "reference" / "cli" / "index.html"
    ).read_text().replace("&quot;", '"')


def test_code_pipes_unescapes_only_inside_code_in_table_rows():
    assert gen_reference.code_pipes("| `a\\|b` | x \\| y |") == "| `a|b` | x \\| y |"
    assert gen_reference.code_pipes("text `a\\|b`") == "text `a\\|b`"


def test_replay_is_linked_and_at_a_glance_has_capture_profile_and_init_from_profile():
    """Issue 51: docs/replay.md was linked from neither the README nor the site's index; the CLI
    reference's "At a glance" left out capture, profile and init --from-profile."""
    assert "(docs/replay.md)" in (REPO / "README.md").read_text()
    assert "(replay.md)" in (REPO / "docs" / "index.md").read_text()
    glance = (REPO / "docs" / "reference" / "cli.md").read_text().split("## At a glance")[1].split("\n## ")[0]
    for command in ("`cmx capture ", "`cmx profile show ", "`cmx init NAME --from-profile "):
        assert command in glance, command

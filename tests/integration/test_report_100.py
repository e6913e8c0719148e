"""`cmx report` at 100 cells × 3 repeats (issue 28), in a real headless Chromium: every chart is
drawn as SVG and none fails, the page says how long it took, and the per-cell table sorts on a
header click and filters on typed words, with no network."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import cmx
from tests.integration.test_report import _chromium
from tests.prereqs import require
from tests.results_fixture import build_grid

#: Issue 28 asks for under 2 s; several helpers share two cores here, so the test allows five times
#: that and prints the figure (benchmarks/cells100.py holds the 2 s target).
DRAWN_BOUND_MS = 10_000


@pytest.fixture(scope="module")
def grid_page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grid")
    db = build_grid(tmp / "g.duckdb", repeats=3, tasks_per_run=20)
    out = tmp / "out"
    p = cmx("report", "grid", "--db", str(db), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "100 cells, 300 runs" in p.stdout
    return out / "index.html"


def _dom(page, profile) -> tuple[str, str]:
    browser = _chromium()
    if not browser:
        require("chromium is not installed and `apt-get install -y chromium` did not provide it")
    p = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=30000",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout, p.stderr


def test_100_cells_every_chart_drawn_in_chromium(grid_page, tmp_path):
    dom, log = _dom(grid_page, tmp_path / "profile")
    charts = int(re.search(r'name="cmx-charts" content="(\d+)"', dom).group(1))
    assert charts == 9  # both trade-offs and the seven charts of the data
    # Each slot's first child is the chart's SVG (vega-embed draws into the slot itself).
    for i in range(charts):
        assert re.search(rf'<div class="chart[^"]*" id="chart-{i}"[^>]*><svg[^>]*class="marks"', dom), (
            f"chart-{i} holds no SVG"
        )
    assert "chart failed:" not in dom.replace('"chart failed: " + err', "")
    console = [line for line in log.splitlines() if "CONSOLE" in line]
    assert not [line for line in console if "Error" in line], console
    assert not re.search(r"https?://(?!www\.w3\.org)[^\s\"']+", "\n".join(console)), "nothing fetched"
    drawn = int(re.search(r'data-charts-drawn-ms="(\d+)"', dom).group(1))
    print(f"100 cells × 3 repeats: every chart drawn {drawn} ms after the page was requested (target 2,000 ms)")
    assert drawn < DRAWN_BOUND_MS
    # The table: a row per cell, each median with its interval and n.
    assert dom.count('<tr class="ok">') == 100 and dom.count("n=3</span>") >= 100


#: Clicks and typing, as a reader would do them, recorded into the DOM for --dump-dom to show.
DRIVE = """<script>
window.addEventListener("load", () => {
  const heads = Array.from(document.querySelectorAll("#cells thead th"));
  const column = name => heads.findIndex(th => th.textContent === name);
  const cells = i => Array.from(document.querySelectorAll("#cells tbody tr"))
    .filter(r => !r.hidden).map(r => r.cells[i].textContent);
  const out = {};
  heads[column("concurrency")].click();
  out.concurrency = cells(column("concurrency"));
  heads[column("consume")].click(); heads[column("consume")].click();  // twice: descending
  out.best = [0, 1, 2].map(i => cells(i)[0]).join(" / ");
  const filter = document.getElementById("cells-filter");
  filter.value = "rabbitmq  threads";
  filter.dispatchEvent(new Event("input"));
  out.filtered = cells(0).length + " " + cells(1).join(",");
  out.shown = document.getElementById("cells-shown").textContent;
  document.body.setAttribute("data-driven", JSON.stringify(out));
});
</script></body>"""


def test_100_cell_table_sorts_and_filters_in_chromium(grid_page, tmp_path):
    import html
    import json

    page = tmp_path / "driven.html"
    page.write_text(grid_page.read_text().replace("</body>", DRIVE))
    dom, _ = _dom(page, tmp_path / "profile")
    driven = json.loads(html.unescape(re.search(r'data-driven="([^"]*)"', dom).group(1)))
    # Numbers sort as numbers: 1, 2, 4 … 512, ten cells each (not "1", "128", "16", …).
    assert driven["concurrency"] == [str(c) for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) for _ in range(10)]
    # Sorted on consume rate, highest first: the fixture's known best cell.
    assert driven["best"] == "rabbitmq / prefork / 64"
    assert driven["filtered"] == "10 " + ",".join(["threads"] * 10)
    assert driven["shown"] == "10 of 100 cells"

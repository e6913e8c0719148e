"""`cmx report` over a fixture database (no services): files, offline HTML, valid PNGs, and the
page rendered in a real headless Chromium with every chart drawn."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO, cmx
from tests.prereqs import require
from tests.results_fixture import build_matrix

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ARTIFACTS = REPO / "results" / "test-artifacts"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    db = build_matrix(tmp / "r.duckdb")
    out = tmp / "out"
    p = cmx("report", "exp", "--db", str(db), "--out", str(out))
    assert p.returncode == 0, p.stderr
    return out, p.stdout




def test_report_writes_every_file(report):
    out, stdout = report
    names = re.search(r"charts \(([^)]*)\)", stdout).group(1).split(", ")
    # The fixture has throughput, latency, samples, peaks and connections: every chart fits.
    assert names == ["throughput", "latency", "memory", "peak_memory", "connections"]
    assert (out / "index.html").is_file()
    for name in names:
        assert (out / f"{name}.png").read_bytes()[:8] == PNG_MAGIC
        spec = json.loads((out / f"{name}.vl.json").read_text())
        assert "vega-lite" in spec["$schema"]


def test_html_is_offline_and_marks_failures(report):
    out, _ = report
    page = (out / "index.html").read_text()
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)\s*=\s*[\"']?(https?:)?//", page, re.I)
    assert not re.search(r"@import\s+url\(\s*[\"']?https?:", page, re.I)
    assert 'name="cmx-charts" content="5"' in page
    # (redis, prefork, 1) has one failed run that lost 2 tasks: marked in the table.
    assert "⚠ 1 failed, 2 tasks lost" in page
    assert page.count('<tr class="bad">') == 1


def _chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], capture_output=True, timeout=900)
    return shutil.which("chromium")


def test_page_renders_every_chart_in_chromium(report, tmp_path):
    out, _ = report
    browser = _chromium()
    if not browser:
        require("chromium is not installed and `apt-get install -y chromium` did not provide it")
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=10000", "--enable-logging=stderr", "--v=0"]
    url = (out / "index.html").as_uri()
    p = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    assert len(re.findall(r'<svg[^>]*class="marks"', dom)) == 5, "every chart the report drew is rendered"
    assert "chart failed:" not in dom.replace('"chart failed: " + err', "")
    console = [l for l in p.stderr.splitlines() if "CONSOLE" in l]
    assert not [l for l in console if "Error" in l], console
    # Nothing fetched: the log names any URL the page asked for.
    assert not re.search(r"https?://(?!www\.w3\.org)[^\s\"']+", "\n".join(console))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    p = subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1400,3000", url],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert shot.read_bytes()[:8] == PNG_MAGIC

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
    # The fixture has throughput, latency, tasks, queue depth, samples, peaks and connections: every chart fits,
    # and both trade-offs of "Which configuration?" (consume rate against peak PSS, p99 against rate).
    assert names == [
        "tradeoff_memory",
        "tradeoff_latency",
        "throughput",
        "latency",
        "latency_spectrum",
        "rate_over_time",
        "memory",
        "peak_memory",
        "connections",
    ]
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
    assert 'name="cmx-charts" content="9"' in page
    # (redis, prefork, 1) has one failed run that lost 2 tasks: marked in the table.
    assert "⚠ 1 failed, 2 tasks lost" in page
    assert page.count('<tr class="bad">') == 1


def _marks(spec: dict) -> list[str]:
    """Every mark type anywhere in a Vega-Lite spec (layers, facets, concatenations)."""
    found = []
    if isinstance(spec, dict):
        mark = spec.get("mark")
        if mark:
            found.append(mark if isinstance(mark, str) else mark["type"])
        for value in spec.values():
            found += _marks(value)
    elif isinstance(spec, list):
        for value in spec:
            found += _marks(value)
    return found


def _values(spec: dict) -> list[dict]:
    """Every inline data row in a spec."""
    rows = []
    if isinstance(spec, dict):
        if isinstance(spec.get("values"), list):
            rows += [v for v in spec["values"] if isinstance(v, dict)]  # not an axis's tick values
        for value in spec.values():
            rows += _values(value)
    elif isinstance(spec, list):
        for value in spec:
            rows += _values(value)
    return rows


def test_aggregated_charts_carry_their_interval_and_n(report):
    out, _ = report
    page = (out / "index.html").read_text()
    # The table: under each median its interval and n (2 ok runs per cell).
    assert page.count('<span class="ci">') >= 8 and "n=2" in page
    # connections keep concurrency on the axis, pool and broker as series (#10): 2 runs a point.
    for name, n in (("throughput", 2), ("peak_memory", 2), ("connections", 2)):
        spec = json.loads((out / f"{name}.vl.json").read_text())
        rows = _values(spec)
        assert rows and all(r["n"] == n for r in rows), name
        assert {"errorbar", "rule"} & set(_marks(spec)), name  # an error bar is drawn
    rate = _values(json.loads((out / "throughput.vl.json").read_text()))
    # consume_rate of (redis, prefork, 1) is 1011 and 1012: the interval lies within them.
    cell = next(r for r in rate if r["cell"] == "redis / prefork / 1")
    assert 1011 <= cell["low"] <= cell["median"] == 1011.5 <= cell["high"] <= 1012 and cell["n_label"] == "n=2"
    lat = _values(json.loads((out / "latency.vl.json").read_text()))
    assert all(r["cell"].endswith("(n=2)") and r["p99_low"] <= r["p99_s"] <= r["p99_high"] for r in lat)


def test_percentile_and_rate_over_time_charts(report):
    out, _ = report
    spec = json.loads((out / "latency_spectrum.vl.json").read_text())
    rows = _values(spec)
    # 20 tasks per cell (2 runs × 10), latencies 0.1 … 1.0 s twice: p50 = 0.55, max = 1.0, and p99.9 is
    # left out (20 tasks cannot resolve 1 in 1,000).
    cell = [r for r in rows if r["cell"].startswith("redis / prefork / 1 ")]
    assert {r["percentile"]: r["latency_s"] for r in cell}.keys() == {"50%", "90%", "max"}
    assert {r["percentile"]: round(r["latency_s"], 3) for r in cell}["50%"] == 0.55
    assert {r["percentile"]: r["latency_s"] for r in cell}["max"] == pytest.approx(1.0)
    assert spec["encoding"]["x"]["scale"]["type"] == "log" and spec["encoding"]["y"]["scale"]["type"] == "log"
    assert len({r["cell"] for r in rows}) == 8
    over = json.loads((out / "rate_over_time.vl.json").read_text())
    rows = _values(over)
    assert len({r["run"] for r in rows}) == 6  # the first ok run of (at most) six cells
    first = [r for r in rows if r["run"] == rows[0]["run"]]
    # One task finished per second after the first send (finished at +0.1 s, +1.2 s, … +10.0 s): a
    # 10 s run in 0.5 s buckets, so every other one holds a task (2/s) and the queue drained from 10
    # to 0, one a second.
    assert sum(r["completed"] for r in first) == 10 and {r["width_s"] for r in first} == {0.5}
    assert {r["rate"] for r in first} == {0.0, 2.0}
    assert [r["queue_depth"] for r in first if r["queue_depth"] is not None] == list(range(10, -1, -1))


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
    flags = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=10000",
        "--enable-logging=stderr",
        "--v=0",
    ]
    url = (out / "index.html").as_uri()
    p = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    assert len(re.findall(r'<svg[^>]*class="marks"', dom)) == 9, "every chart the report drew is rendered"
    assert "chart failed:" not in dom.replace('"chart failed: " + err', "")
    console = [l for l in p.stderr.splitlines() if "CONSOLE" in l]
    assert not [l for l in console if "Error" in l], console
    # Nothing fetched: the log names any URL the page asked for.
    assert not re.search(r"https?://(?!www\.w3\.org)[^\s\"']+", "\n".join(console))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    p = subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1400,3000", url], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert shot.read_bytes()[:8] == PNG_MAGIC


def test_rate_latency_chart_from_a_rate_fraction_sweep(tmp_path):
    """Fixture runs shaped like a rate-vs-latency sweep: per pool a search cell (max 1,000/s) and
    cells at 0.5 and 0.9 of it; the chart draws p50 and p99 against the achieved rate."""
    from cmx.engine.results import db as results_db
    from tests.results_fixture import add_run

    path = tmp_path / "rl.duckdb"
    with results_db.connect(path) as con:
        for pool in ("solo", "threads"):
            add_run(
                con,
                "rl",
                f"{pool}-search",
                {"pool": pool, "params.mode": "ramp"},
                metrics={"max_sustainable_rate": 1000.0},
            )
            for fraction in (0.5, 0.9):
                for repeat in (1, 2, 3):
                    add_run(
                        con,
                        "rl",
                        f"{pool}-{fraction}-{repeat}",
                        {"pool": pool, "params.mode": "stream", "params.rate_fraction": fraction},
                        repeat=repeat,
                        metrics={
                            "consume_rate": 1000 * fraction + repeat,
                            "latency_p50_s": 0.01 / (1 - fraction) + repeat / 1000,
                            "latency_p99_s": 0.05 / (1 - fraction) + repeat / 1000,
                            "target_rate": 1000 * fraction,
                        },
                    )
    out = tmp_path / "out"
    p = cmx("report", "rl", "--db", str(path), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "rate_latency" in p.stdout
    spec = json.loads((out / "rate_latency.vl.json").read_text())
    rows = _values(spec)
    assert sorted({r["series"] for r in rows}) == ["solo p50", "solo p99", "threads p50", "threads p99"]
    solo = sorted(
        (r["fraction"], r["rate"], round(r["latency_s"], 4), r["n"]) for r in rows if r["series"] == "solo p99"
    )
    assert solo == [(0.5, 502, 0.102, 3), (0.9, 902, 0.502, 3)]
    assert all(r["low"] <= r["latency_s"] <= r["high"] for r in rows)
    page = (out / "index.html").read_text()
    assert "solo: 1,000/s" in page and "threads: 1,000/s" in page

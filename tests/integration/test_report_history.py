"""`cmx report` of an experiment with several sweeps: each headline metric's history per cell,
one point per sweep with its 95 % interval and the change points cmx trend finds marked (a
fixture database, no services)."""

from __future__ import annotations

import json
import re

from tests.conftest import cmx
from tests.results_fixture import HISTORY_CELL, history

OTHER = {**HISTORY_CELL, "pool": "solo"}


def _layers(spec: dict) -> list[dict]:
    inner = spec.get("spec", spec)
    return inner.get("layer", [])


def test_history_charts_mark_the_night_a_cell_got_slower(tmp_path):
    # Four nights; the first cell's last night is 30 % slower, the other cell's is not (each its own level).
    db = history(tmp_path / "r.duckdb", [1000, 1004, 997, 1001], cells=(HISTORY_CELL, OTHER))
    import duckdb

    with duckdb.connect(str(db)) as con:  # the first cell's runs of the last night: 30 % slower
        con.execute("UPDATE metrics SET value = value * 0.7 WHERE name = 'consume_rate' AND run_id LIKE 'r4-0-%'")
        con.execute("UPDATE metrics SET value = value / 0.7 WHERE name = 'latency_p99_s' AND run_id LIKE 'r4-0-%'")
    out = tmp_path / "out"
    p = cmx("report", "e", "--db", str(db), "--out", str(out))
    assert p.returncode == 0, p.stderr
    names = re.search(r"charts \(([^)]*)\)", p.stdout).group(1).split(", ")
    assert "history_consume_rate" in names and "history_latency_p99_s" in names, names
    spec = json.loads((out / "history_consume_rate.vl.json").read_text())
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in _layers(spec)]
    assert marks == ["line", "errorbar", "point", "text"], marks
    rows = next(iter(spec["datasets"].values())) if "datasets" in spec else spec["data"]["values"]
    assert len(rows) == 8 and {r["at"] for r in rows} == {"s001", "s002", "s003", "s004"}
    assert all(r["low"] <= r["median"] <= r["high"] for r in rows)
    changed = [(r["at"], r["pool"], r["verdict"]) for r in rows if r["change"] is not None]
    assert changed == [("s004", "threads", "worse")], changed
    [label] = [r["change"] for r in rows if r["change"] is not None]
    assert label.endswith(" %") and -31 < float(label[:-2]) < -29, label  # the change %, as cmx trend says it
    page = (out / "index.html").read_text()
    assert "History of" in page and "change point(s) cmx trend finds" in page
    # Two cells split by pool: one colour each (analysis/legend.py), so no more than ten colours;
    # the change points are one fixed red, on top of the cells' colours.
    colours = [layer["encoding"]["color"] for layer in _layers(spec)]
    assert [c.get("field") for c in colours] == ["pool", "pool", None, None], colours
    assert colours[2] == {"value": "#d62728"}, colours


def test_one_sweep_draws_no_history(tmp_path):
    db = history(tmp_path / "r.duckdb", [1000])
    out = tmp_path / "out"
    p = cmx("report", "e", "--db", str(db), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "history_" not in p.stdout and not list(out.glob("history_*"))


def test_each_point_carries_its_noise_and_a_change_says_the_host_was_busier(tmp_path):
    db = history(tmp_path / "r.duckdb", [1000, 1004, 997, 1001], cells=(HISTORY_CELL, OTHER))
    import duckdb

    with duckdb.connect(str(db)) as con:  # the first cell's last night: slower, on a host busy with others
        con.execute("UPDATE metrics SET value = value * 0.7 WHERE name = 'consume_rate' AND run_id LIKE 'r4-0-%'")
        con.execute(
            "INSERT INTO metrics SELECT DISTINCT run_id, 'noise_cpu_share', "
            "CASE WHEN run_id LIKE 'r4-0-%' THEN 0.3 ELSE 0.02 END, 'share' FROM metrics"
        )
    out = tmp_path / "out"
    p = cmx("report", "e", "--db", str(db), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "history_noise_cpu_share" not in p.stdout  # noise is shown per point, not charted as a headline
    spec = json.loads((out / "history_consume_rate.vl.json").read_text())
    rows = next(iter(spec["datasets"].values())) if "datasets" in spec else spec["data"]["values"]
    assert {r["noise"] for r in rows if not (r["at"] == "s004" and r["pool"] == "threads")} == {
        "outside CPU 2 % of cores"
    }
    [change] = [r for r in rows if r["change"] is not None]
    assert change["noise"] == "outside CPU 30 % of cores"
    assert change["noise_change"] == "host 15.0× busier after (outside the run: 30 % of its cores after, 2 % before)"
    tips = [t["field"] for layer in _layers(spec) for t in layer["encoding"].get("tooltip", [])]
    assert "noise" in tips and "noise_change" in tips

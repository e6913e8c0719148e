"""Known-answer benchmark of ``cmx trend``'s change points beside apache-otava (issue 37 point 7).

    .venv/bin/python benchmarks/changepoints.py --quick     # 1 seed, 156 histories: ~8 s
    .venv/bin/python benchmarks/changepoints.py             # 8 seeds, 1,248 histories: ~70 s
    .venv/bin/python benchmarks/changepoints.py --save      # also benchmarks/measured/changepoints-DATE.txt
    options: --seeds N, --nights N, --no-otava, --otava-pvalue P, --otava-window N, --otava-magnitude M

Labelled histories (numpy default_rng, seed 37 + seed number; 24 nights each): a metric of known
direction (consume_rate, higher is better) at 1000 with a step down and up of 5, 10 and 20 %, two
steps (1000 → 900 → 800), down and back (1000 → 800 → 1000), a three-night dip (1000 → 700 for 3
nights → 1000), a ramp (1000 → 850 over nights 8–15), one outlier night (all its runs −30 %) and
two A/A histories (no change). Each in every condition: 3 and 5 runs a night; run-to-run noise
(coefficient of variation) 2, 5 and 10 %; without and with a night-level term (every run of a night
shifted by one N(0, 1.5 %) draw: real nights differ a bit more than runs within a night).

cmx: every history is one cell of one experiment (one sweep a night) written with cmx's writers
(db.record_sweep / record_run_start / record_run_end, metrics rows), then
``cmx.analysis.trend.trend(con, experiment)``; each series' ``changes`` are read (index,
``comparison.change_pct``, ``comparison.verdict``), with a fresh statistics cache (CMX_STATS_CACHE).
Otava: apache-otava in its own venv (~/.cache/cmx-bench/otava-venv, made on first use; it does not
install beside this project's numpy/scipy pins), ``otava.analysis.compute_change_points`` on each
history's per-night medians (Otava takes one value a point) with Otava's defaults (window_len 50,
max_pvalue 0.001, min_magnitude 0: those of ``otava analyze`` and ``AnalysisOptions``); a change's
size is its forward_change_percent (mean after / mean before − 1, the neighbouring segments).

Scoring, the same for both: a reported change matches a true change within ±1 night of it (each true
change matched at most once, the nearest first). P (precision) = matched / reported; R (recall) =
matched / true; size = mean |reported % − true %| in percentage points over the matches, the true %
from the level before the change to the level after it; A/A = false changes per 100 series-nights
of the A/A histories. The ramp has one true change (its total, −15 %) matched by any change from a
night before its start to a night after its end; more changes inside it are neither matched nor
false, and no size error is taken from it (a ramp has no one size). The outlier night is a real
event of that night (every run of it moved) and is scored as a down-and-back: two true changes, on
it (−30 %) and the night after (+42.9 %). cmx's changes are counted whatever their verdict;
"cmx b/w" counts only those with verdict better or worse (the rest: differs, small, ...).
Printed: per family, without and with the night-level noise, and per condition (runs × noise), P, R,
size and A/A of cmx (all its changes), of cmx's better/worse changes, and of Otava; then cmx's errors
per family (true changes missed; false ones on the latest night, near a true one (2–3 nights off) or
elsewhere; the signed size error), the verdicts of cmx's changes, and the targets met or missed.
Targets (issue 37): R ≥ Otava's, P ≥ 0.9, size error ≤ 2 points, A/A ≤ 1 false change per 100
series-nights. Exit status 1 when cmx misses one of them overall.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cmx.analysis import trend as trend_mod  # noqa: E402
from cmx.analysis.views import connect  # noqa: E402
from cmx.engine.results import db  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
import otava_ref  # noqa: E402  (Otava in its own venv)
from changepoint_scores import TOOLS, _mean, scores  # noqa: E402  (how found changes are scored)

BASE, METRIC, EXPERIMENT, T0 = 1000.0, "consume_rate", "cp", 1_700_000_000
RUNS, CVS, NIGHT_CVS = (3, 5), (0.02, 0.05, 0.10), (0.0, 0.015)
TARGET_P, TARGET_SIZE, TARGET_AA = 0.9, 2.0, 1.0


@dataclass
class Scenario:
    family: str
    name: str
    levels: np.ndarray  # the true level of each night
    changes: list[int]  # the first night of each new level
    ramp: tuple[int, int] | None = None  # (first, last) night of a ramp: one change, matched anywhere in it

    def true_pct(self, i: int) -> float:
        if self.ramp:
            return 100 * (self.levels[self.ramp[1]] / self.levels[self.ramp[0] - 1] - 1)
        return 100 * (self.levels[i] / self.levels[i - 1] - 1)


def scenarios(n: int) -> list[Scenario]:
    def steps(*at_level):  # (night, level) pairs: the level from that night on
        levels = np.full(n, BASE)
        for at, level in at_level:
            levels[at:] = level
        return levels, [at for at, _ in at_level]

    mid, third = n // 2, n // 3
    out = []
    for pct in (10, 5, 20):
        for sign, word in ((-1, "down"), (1, "up")):
            out.append(Scenario(f"step ±{pct}%", f"{word} {pct}%", *steps((mid, BASE * (1 + sign * pct / 100)))))
    out.append(Scenario("two steps", "1000>900>800", *steps((third, 900), (2 * third, 800))))
    out.append(Scenario("down & back", "1000>800>1000", *steps((third, 800), (2 * third, BASE))))
    out.append(Scenario("3-night dip", "1000>700x3>1000", *steps((mid, 700), (mid + 3, BASE))))
    first, last = third, third + 7
    ramp = np.full(n, BASE)
    ramp[first : last + 1] = BASE - 150 * np.arange(1, 9) / 8
    ramp[last + 1 :] = BASE - 150
    out.append(Scenario("ramp", "1000>850 over 8", ramp, [first], (first, last)))
    out.append(Scenario("outlier night", "1 night -30%", *steps((mid, 700), (mid + 1, BASE))))
    out.append(Scenario("A/A", "flat", np.full(n, BASE), []))
    out.append(Scenario("A/A", "flat", np.full(n, BASE), []))
    return out


@dataclass
class History:
    scenario: Scenario
    runs: int
    cv: float
    night_cv: float
    values: list[np.ndarray]  # per night, its runs' values
    found: dict[str, list[tuple[int, float, str]]] = field(default_factory=dict)  # tool → (index, change %, verdict)


def histories(seeds: int, nights: int) -> list[History]:
    out = []
    for seed in range(seeds):
        rng = np.random.default_rng(37 + seed)
        for night_cv in NIGHT_CVS:
            for runs in RUNS:
                for cv in CVS:
                    for sc in scenarios(nights):
                        shift = 1 + night_cv * rng.standard_normal(nights)
                        noise = 1 + cv * rng.standard_normal((nights, runs))
                        vals = sc.levels[:, None] * shift[:, None] * noise
                        out.append(History(sc, runs, cv, night_cv, list(vals)))
    return out


# --------------------------------------------------------------------------- cmx


def write_db(path: Path, hs: list[History]) -> None:
    """One sweep a night, one cell a history. The sweeps and the first night's runs are written with
    cmx's writers (db.record_sweep, record_run_start, record_run_end, as tests/results_fixture.history);
    the other nights' runs are copies of the first night's rows with their own ids and times (the
    writers cost ~2 ms a run: 15 s more for --quick's 15,000 runs)."""
    nights = len(hs[0].values)
    with db.connect(path) as con:
        con.execute("BEGIN")
        for night in range(nights):
            db.record_sweep(
                con,
                f"n{night:03d}",
                EXPERIMENT,
                "cp.yaml",
                "throughput",
                "",
                "inv",
                {},
                {"revision": 1},
                tags={"night": str(night)},
                planned=sum(h.runs for h in hs),
            )
        for k, h in enumerate(hs):
            for repeat in range(1, h.runs + 1):
                run_id = f"r000-{k}-{repeat}"
                db.record_run_start(
                    con,
                    experiment=EXPERIMENT,
                    sweep_id="n000",
                    run_id=run_id,
                    cell_id=f"h{k:05d}",
                    repeat=repeat,
                    workload="throughput",
                    dims={"history": k},
                    params={"mode": "stream"},
                    warmup_s=0,
                )
                db.record_run_end(con, run_id, "ok", None, {})
        con.execute(f"""INSERT INTO run_starts BY NAME
            SELECT s.* REPLACE ('n' || lpad(t.n::VARCHAR, 3, '0') AS sweep_id,
                                'r' || lpad(t.n::VARCHAR, 3, '0') || substr(s.run_id, 5) AS run_id)
            FROM run_starts s, range(1, {nights}) t(n) WHERE s.sweep_id = 'n000'""")
        con.execute(f"""INSERT INTO run_ends BY NAME
            SELECT e.* REPLACE ('r' || lpad(t.n::VARCHAR, 3, '0') || substr(e.run_id, 5) AS run_id)
            FROM run_ends e, range(1, {nights}) t(n) WHERE e.run_id LIKE 'r000-%'""")
        # The writers stamp now(): the nights an hour apart, the runs a second.
        night = "CAST(substr(sweep_id, 2) AS INTEGER)"
        con.execute(f"UPDATE sweeps SET started_at = to_timestamp({T0} + 3600 * {night})")
        con.execute(f"UPDATE run_starts SET started_at = to_timestamp({T0} + 3600 * {night} + repeat)")
        ids = [
            f"r{night:03d}-{k}-{repeat}"
            for night in range(nights)
            for k, h in enumerate(hs)
            for repeat in range(1, h.runs + 1)
        ]
        vals = [float(v) for night in range(nights) for h in hs for v in h.values[night]]
        con.execute(f"INSERT INTO metrics SELECT unnest(?), '{METRIC}', unnest(?), ''", [ids, vals])
        con.execute("COMMIT")


def run_cmx(hs: list[History], tmp: Path) -> float:
    """Each history's changes by ``cmx trend`` (in place); the seconds trend() took."""
    path = tmp / "cp.duckdb"
    write_db(path, hs)
    os.environ["CMX_STATS_CACHE"] = str(tmp / "stats.duckdb")  # a fresh cache: the user's is untouched
    with connect(path, read_only=True) as con:
        t0 = time.monotonic()
        result = trend_mod.trend(con, EXPERIMENT, metrics=(METRIC,))
        took = time.monotonic() - t0
    by_cell = {s.cell_id: s for s in result.series}
    for k, h in enumerate(hs):
        s = by_cell[f"h{k:05d}"]
        h.found["cmx"] = [(c.index, c.comparison.change_pct, c.comparison.verdict) for c in s.changes]
    return took


# --------------------------------------------------------------------------- otava


def run_otava(hs: list[History], window: int, pvalue: float, magnitude: float) -> tuple[float, str]:
    """Each history's changes by Otava on its per-night medians (in place); (seconds, otava's version)."""
    found, took, version = otava_ref.change_points(
        [[float(np.median(v)) for v in h.values] for h in hs], window, pvalue, magnitude
    )
    for h, cps in zip(hs, found, strict=True):
        h.found["otava"] = [(i, pct, "") for i, pct in cps]
    return took, version


def table(title: str, groups: dict, order: list) -> list[str]:
    head = (
        f"  {'':22} {'true':>5} | {'cmx: P':>6} {'R':>5} {'size':>5} {'A/A':>5} | {'b/w: P':>6} {'R':>5} "
        f"{'size':>5} {'A/A':>5} | {'otava P':>7} {'R':>5} {'size':>5} {'A/A':>5}"
    )
    lines = [title, head]
    for group in [*order, None]:
        if group not in groups:
            continue
        row = groups[group]
        cols = []
        for tool in TOOLS:
            if tool in row:
                cols.append(" ".join(f"{c:>5}" for c in row[tool].cells()) + f" {row[tool].aa():>5}")
            else:
                cols.append(" ".join(f"{'':>5}" for _ in range(4)))
        cmx = row["cmx"]
        label = "overall" if group is None else str(group)
        lines.append(f"  {label:22} {cmx.true:5d} |  {cols[0]} |  {cols[1]} |   {cols[2]}")
    goal = f"{f'≥{TARGET_P:g}':>5} {'≥otv':>5} {f'≤{TARGET_SIZE:g}':>5} {f'≤{TARGET_AA:g}':>5}"
    lines.append(f"  {'target (cmx)':22} {'':5} |  {goal} |")
    return lines


def errors(groups: dict, order: list) -> list[str]:
    """cmx's misses, false changes and signed size error per family: what to look at when tuning."""
    lines = [
        (
            "cmx's errors (both night noises): true changes missed; false changes (on the latest night, near: "
            "2-3 nights from a true one, other); size error: mean |…| and signed (reported − true), % points"
        )
    ]
    for group in [*order, None]:
        if group in groups:
            s = groups[group]["cmx"]
            size = f"{_mean(s.size_err):5.1f} {_mean(s.bias):+6.1f}" if s.size_err else f"{'-':>5} {'-':>6}"
            false = s.reported - s.matched
            lines.append(
                f"  {'overall' if group is None else group:22} missed {s.true - s.matched:4d}/{s.true:<4d}"
                f" false {false:4d}/{s.reported:<4d} (latest {s.false_last:3d}, near {s.false_near:3d}, "
                f"other {false - s.false_last - s.false_near:3d})  size {size}"
            )
    return lines


def verdict_counts(hs: list[History]) -> str:
    counts: dict[str, int] = {}
    for h in hs:
        for _, _, v in h.found["cmx"]:
            counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{v} {n}" for v, n in sorted(counts.items())) or "none"


def targets(overall: dict) -> tuple[list[str], bool]:
    cmx, otava = overall["cmx"], overall.get("otava")
    p = cmx.matched / cmx.reported if cmx.reported else 1.0
    r = cmx.matched / cmx.true if cmx.true else 1.0
    r_otava = otava.matched / otava.true if otava and otava.true else None
    size = float(_mean(cmx.size_err)) if cmx.size_err else 0.0
    aa = 100 * cmx.aa_false / cmx.aa_nights if cmx.aa_nights else 0.0
    checks = [
        (f"P {p:.2f} ≥ {TARGET_P}", p >= TARGET_P),
        (
            f"R {r:.2f} ≥ otava's {r_otava:.2f}" if r_otava is not None else f"R {r:.2f} (no otava)",
            r_otava is None or r >= r_otava,
        ),
        (f"size {size:.1f} ≤ {TARGET_SIZE:g} points", size <= TARGET_SIZE),
        (f"A/A {aa:.2f} ≤ {TARGET_AA:g} per 100 series-nights", aa <= TARGET_AA),
    ]
    line = "targets (cmx, all changes): " + "; ".join(f"{what} {'met' if ok else 'MISSED'}" for what, ok in checks)
    return [line], all(ok for _, ok in checks)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one seed (well under a minute)")
    ap.add_argument("--seeds", type=int, default=None, help="histories per scenario and condition (default 8)")
    ap.add_argument("--nights", type=int, default=24)
    ap.add_argument("--no-otava", action="store_true")
    ap.add_argument("--otava-window", type=int, default=50)
    ap.add_argument("--otava-pvalue", type=float, default=0.001)
    ap.add_argument("--otava-magnitude", type=float, default=0.0)
    ap.add_argument("--save", action="store_true", help="also write benchmarks/measured/changepoints-DATE.txt")
    args = ap.parse_args()
    seeds = args.seeds or (1 if args.quick else 8)
    t_start = time.monotonic()
    hs = histories(seeds, args.nights)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        cmx_s = run_cmx(hs, Path(tmp))
        write_s = time.monotonic() - t0 - cmx_s
    otava_note = "otava: not run (--no-otava)"
    if not args.no_otava:
        try:
            otava_s, version = run_otava(hs, args.otava_window, args.otava_pvalue, args.otava_magnitude)
            otava_note = (
                f"otava {version}: compute_change_points(per-night medians, window_len={args.otava_window}, "
                f"max_pvalue={args.otava_pvalue:g}, min_magnitude={args.otava_magnitude:g}) {otava_s:.1f} s"
            )
        except (OSError, RuntimeError, subprocess.CalledProcessError, ValueError) as exc:
            otava_note = f"otava: unavailable ({exc})"
    order = list(dict.fromkeys(h.scenario.family for h in hs))
    n_runs = sum(h.runs for h in hs) * args.nights
    out = [
        (
            f"change points, known answers: {len(hs)} histories ({seeds} seed(s) × {len(order)} families × "
            f"runs {'/'.join(map(str, RUNS))} × noise {'/'.join(f'{c:.0%}' for c in CVS)} × night noise "
            f"{'/'.join(f'{c:.1%}' for c in NIGHT_CVS)}), {args.nights} nights, {n_runs:,} runs"
        ),
        (
            f"cmx ({Path(trend_mod.__file__).parent.parent}): trend() {cmx_s:.1f} s (writing {write_s:.1f} s); "
            f"{otava_note}"
        ),
        (
            "P precision, R recall, size mean |reported − true| change in % points, A/A false changes per 100 "
            "series-nights; b/w: cmx's changes of verdict better/worse only"
        ),
    ]
    for night_cv in NIGHT_CVS:
        part = [h for h in hs if h.night_cv == night_cv]
        out += table(f"night-level noise {night_cv:.1%}:", scores(part, lambda h: h.scenario.family), order)
    conds = [f"{r} runs, noise {c:.0%}" for r in RUNS for c in CVS]
    out += table("by condition (both night noises):", scores(hs, lambda h: f"{h.runs} runs, noise {h.cv:.0%}"), conds)
    out += errors(scores(hs, lambda h: h.scenario.family), order)
    overall = scores(hs, lambda h: None)[None]
    lines, met = targets(overall)
    out += [
        f"cmx verdicts of its changes: {verdict_counts(hs)}",
        *lines,
        f"total {time.monotonic() - t_start:.1f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
    ]
    text = "\n".join(out)
    print(text)
    if args.save:
        path = REPO / "benchmarks" / "measured" / f"changepoints-{datetime.date.today().isoformat()}.txt"
        path.write_text(text + "\n")
        print(f"saved {path.relative_to(REPO)}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

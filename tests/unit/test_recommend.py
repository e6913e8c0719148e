"""`cmx recommend` on fixture data whose answer is known: ranking, ties, constraints, the Pareto front."""

from __future__ import annotations

import json

import pytest

from cmx.analysis import views
from cmx.analysis.recommend import MAXIMIZE, MINIMIZE, RecommendError, objective, parse_constraint, recommend
from cmx.engine.results import db
from tests.conftest import cmx
from tests.results_fixture import add_run, cell_id

MIB = 2**20
# pool → (consume_rate per run, peak_pss_bytes, tasks_lost): gevent is best; threads can't be told
# apart from it on rate (its runs overlap gevent's) and uses half the memory; prefork is shown
# worse and uses more; solo is fastest but loses tasks.
CELLS = {
    "gevent": ([1000, 1010, 990, 1005, 995], 200 * MIB, 0),
    "threads": ([1002, 985, 998, 1008, 992], 100 * MIB, 0),
    "prefork": ([500, 505, 495, 502, 498], 400 * MIB, 0),
    "solo": ([2000, 2010, 1990, 2005, 1995], 50 * MIB, 3),
}


def dims(pool):
    return {"broker": "redis", "pool": pool, "concurrency": 4}


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "r.duckdb"
    with db.connect(path) as con:
        for pool, (rates, pss, lost) in CELLS.items():
            for i, rate in enumerate(rates):
                add_run(
                    con,
                    "pick",
                    f"{pool}-{i}",
                    dims(pool),
                    repeat=i + 1,
                    metrics={
                        "consume_rate": rate,
                        "peak_pss_bytes": pss + i,
                        "tasks_lost": lost,
                        "latency_p99_s": 0.01 * (i + 1),
                    },
                )
        add_run(con, "pick", "gevent-failed", dims("gevent"), repeat=6, status="failed", metrics={"consume_rate": 1.0})
    return path


def run(path, objectives, constraints=()):
    with views.connect(path, read_only=True) as con:
        return recommend(con, "pick", 1, objectives, [parse_constraint(c) for c in constraints])


def by_pool(rec):
    return {r.values["pool"]: r for r in rec.ranking}


def test_ranking_and_ties(known):
    rec = run(known, [objective("consume_rate", MAXIMIZE)], ["tasks_lost == 0"])
    got = by_pool(rec)
    assert (got["gevent"].rank, got["threads"].rank, got["prefork"].rank) == (1, 2, 3)
    assert got["gevent"].tied_with_best and got["threads"].tied_with_best and not got["prefork"].tied_with_best
    assert got["prefork"].versus_best.verdict == "worse"
    assert got["solo"].rank is None and got["solo"].excluded_by == ["tasks_lost == 0"]
    best = got["gevent"].metrics["consume_rate"]
    assert (best.n, best.median) == (5, 1000)  # the failed run's 1.0 is not a value
    assert rec.pareto == [cell_id(dims("gevent"))]  # one objective: the best
    from cmx.analysis.recommend_format import answer

    assert got["threads"].versus_best.verdict == "same"  # shown within ±5 %
    assert answer(rec)[1] == "Tied with it: 1 cell is shown within ±5 % of it: pool threads."  # the race's words


def test_ties_say_how_many_runs_would_tell(known):
    """Threads at 3 runs against gevent's 5 with noise: neither shown worse nor the same; the answer
    says, in the race's words, how many runs a cell would decide it."""
    from cmx.analysis.recommend_format import answer

    path = known.with_name("noisy.duckdb")
    with db.connect(path) as con:
        for pool, rates in (("gevent", [1000, 1100, 900, 1050, 950]), ("threads", [980, 850, 1080])):
            for i, rate in enumerate(rates):
                add_run(con, "noisy", f"{pool}-{i}", dims(pool), repeat=i + 1, metrics={"consume_rate": rate})
    with views.connect(path, read_only=True) as con:
        rec = recommend(con, "noisy", 1, [objective("consume_rate", MAXIMIZE)], [])
    threads = by_pool(rec)["threads"]
    assert threads.tied_with_best and threads.versus_best.verdict == "inconclusive"
    need = threads.versus_best.runs_needed
    assert need > 3 and answer(rec)[1] == (
        f"Tied with it: 1 cell is not told apart from it: pool threads; the differences seen would take "
        f"{need} runs a cell to decide."
    )


def test_without_constraints_the_fastest_wins(known):
    rec = run(known, [objective("consume_rate", MAXIMIZE)])
    assert rec.best.values["pool"] == "solo" and rec.tied() == []


def test_two_objectives_give_the_pareto_front(known):
    rec = run(known, [objective("consume_rate", MAXIMIZE), objective("peak_pss_bytes", MINIMIZE)], ["tasks_lost == 0"])
    front = {by_pool(rec)[p].cell_id for p in ("gevent", "threads")}
    assert set(rec.pareto) == front  # prefork: slower and bigger than threads


def test_constraints_in_the_summary_units(known):
    rec = run(known, [objective("consume_rate", MAXIMIZE)], ["peak_pss_bytes <= 150MiB", "tasks_lost==0"])
    got = by_pool(rec)
    assert rec.best.values["pool"] == "threads"
    assert got["gevent"].excluded_by == ["peak_pss_bytes <= 150MiB"]
    assert got["solo"].excluded_by == ["tasks_lost==0"]
    assert got["prefork"].excluded_by == ["peak_pss_bytes <= 150MiB"]


def test_bad_input(known):
    with pytest.raises(RecommendError, match="lower is better for latency_p99_s; did you mean --minimize"):
        objective("latency_p99_s", MAXIMIZE)
    with pytest.raises(RecommendError, match="higher is better for consume_rate; did you mean --maximize"):
        objective("consume_rate", MINIMIZE)
    with pytest.raises(RecommendError, match="no run of 'pick' has this metric"):
        run(known, [objective("requests_per_s", MAXIMIZE)])
    with pytest.raises(
        RecommendError,
        match=r"no cell of 'pick' meets every constraint \(peak_pss_bytes <= 1MiB "
        r"excludes 4 of 4\)",
    ):
        run(known, [objective("consume_rate", MAXIMIZE)], ["peak_pss_bytes <= 1MiB"])
    with pytest.raises(RecommendError, match="expected 'METRIC OP VALUE'"):
        parse_constraint("peak_pss_bytes is small")


def test_cli_json_contract_and_words(known):
    p = cmx(
        "recommend",
        "pick",
        "--maximize",
        "consume_rate",
        "--minimize",
        "peak_pss_bytes",
        "--where",
        "tasks_lost == 0",
        "--db",
        str(known),
        "--format",
        "json",
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert {"objectives", "constraints", "ranking", "pareto"} <= set(doc)
    first = doc["ranking"][0]
    assert set(first) == {"cell_id", "rank", "values", "metrics", "tied_with_best", "excluded_by"}
    assert first["rank"] == 1 and first["values"]["pool"] == "gevent" and first["tied_with_best"] is True
    assert {"n", "median", "low", "high"} <= set(first["metrics"]["consume_rate"])
    assert doc["answer"][0].startswith("Run pool gevent: consume_rate 1,000/s [")
    p = cmx("recommend", "pick", "--where", "tasks_lost == 0", "--db", str(known), "--format", "markdown")
    assert p.returncode == 0 and "Run pool gevent" in p.stdout and "Tied with it" in p.stdout  # default objective
    for args, msg in (
        (["--maximize", "latency_p99_s"], "did you mean --minimize"),
        (["--maximize", "nope_rate"], "no run of 'pick' has this metric"),
        (["--maximize", "consume_rate", "--where", "tasks_lost > 5"], "no cell of 'pick' meets"),
        (["--where", "peak_pss_bytes <= 5 parsecs"], "no unit of peak_pss_bytes"),
    ):
        p = cmx("recommend", "pick", *args, "--db", str(known))
        assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)


def test_the_report_opens_with_the_answer(known, tmp_path):
    from cmx.analysis.report import write_report

    with views.connect(known, read_only=True) as con:
        rep = write_report(con, "pick", tmp_path)
    page = rep.html.read_text()
    page = page[page.index("<body>") :]  # the inlined Vega libraries hold "<table" too
    answer = page.index("<h2>Which configuration?</h2>")
    assert answer < page.index("<table")  # before the summary table and every chart
    section = page[answer : page.index("</section>", answer)]
    # The workload's own objective (throughput: consume_rate), cells that lost tasks left out.
    assert "Run pool gevent: consume_rate 1,000/s" in section and "Tied with it" in section
    assert "pool threads" in section and "tasks_lost == 0" in section


@pytest.fixture(scope="module")
def declared(tmp_path_factory):
    """The same cells as an experiment whose file declares objective: {maximize: consume_rate,
    where: {peak_pss_bytes: "<= 150 MiB", tasks_lost: "== 0"}} (issue 38): threads is its answer
    (gevent and prefork use too much memory, solo loses tasks)."""
    path = tmp_path_factory.mktemp("declared") / "r.duckdb"
    definition = {
        "objective": {"maximize": "consume_rate", "where": {"peak_pss_bytes": "<= 150 MiB", "tasks_lost": "== 0"}}
    }
    with db.connect(path) as con:
        db.record_sweep(con, "s1", "declared", "declared.yaml", "throughput", "", "inv", definition, {"revision": 1})
        for pool, (rates, pss, lost) in CELLS.items():
            for i, rate in enumerate(rates):
                add_run(
                    con,
                    "declared",
                    f"{pool}-{i}",
                    dims(pool),
                    repeat=i + 1,
                    metrics={"consume_rate": rate, "peak_pss_bytes": pss + i, "tasks_lost": lost},
                )
    return path


def test_the_experiments_objective_and_its_where_are_the_default(declared, tmp_path):
    p = cmx("recommend", "declared", "--db", str(declared), "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["answer"][0].startswith("Run pool threads: consume_rate"), doc["answer"]
    dropped = {r["values"]["pool"]: r["excluded_by"] for r in doc["ranking"] if r["excluded_by"]}
    assert dropped == {
        "gevent": ["peak_pss_bytes <= 150 MiB"],
        "prefork": ["peak_pss_bytes <= 150 MiB"],
        "solo": ["tasks_lost == 0"],
    }, dropped
    # an objective named on the command line is the user's own question: the file's where is not added
    p = cmx("recommend", "declared", "--maximize", "consume_rate", "--db", str(declared), "--format", "json")
    assert json.loads(p.stdout)["answer"][0].startswith("Run pool solo"), p.stdout
    from cmx.analysis.report import write_report

    with views.connect(declared, read_only=True) as con:
        page = write_report(con, "declared", tmp_path).html.read_text()
    page = page[page.index("<h2>Which configuration?</h2>") :]
    assert "Run pool threads" in page[: page.index("</section>")]


def test_only_narrows_the_cells_ranked(known):
    p = cmx(
        "recommend",
        "pick",
        "--maximize",
        "consume_rate",
        "--only",
        "pool=prefork",
        "--db",
        str(known),
        "--format",
        "json",
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [r["values"]["pool"] for r in doc["ranking"]] == ["prefork"]
    for only, msg in (("pool=nope", "no ok runs"), ("color=red", "not a dimension"), ("pool", "not DIM=VALUE")):
        p = cmx("recommend", "pick", "--only", only, "--db", str(known))
        assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr, (only, p.stderr)


def test_over_a_nightly_history_it_ranks_on_the_nights_since_the_last_change(tmp_path):
    """Nine nights, the last three 30 % slower: recommend ranks on those three (9 runs a cell, not 27
    pooled across the regression into one wide interval) and says so; an unchanged history is
    pooled, said too. (Where the regression is only two nights old, as in issue 50's five nights,
    cmx trend finds no change yet: recommend then says it pooled all five.)"""
    from cmx.analysis.recommend_format import answer
    from tests.results_fixture import HISTORY_CELL, history

    cells = (HISTORY_CELL, {**HISTORY_CELL, "concurrency": 8})
    path = history(tmp_path / "h.duckdb", [1000, 1003, 998, 1001, 999, 1002, 700, 702, 699], cells=cells)
    with views.connect(path, read_only=True) as con:
        rec = recommend(con, "e", 1, [objective("consume_rate", MAXIMIZE)], [])
    best = rec.best.metrics["consume_rate"]
    assert rec.best.values["concurrency"] == 8 and best.n == 9 and best.median < 1500, best
    assert rec.history == (
        "Ranked on the runs of the last 3 sweeps of 9 in this history, since its last change of consume_rate "
        "(sweep s007, cmx trend); the 6 sweeps before it are left out."
    )
    assert rec.history in answer(rec)
    flat = history(tmp_path / "f.duckdb", [1000, 1003, 998], cells=cells)
    with views.connect(flat, read_only=True) as con:
        rec = recommend(con, "e", 1, [objective("consume_rate", MAXIMIZE)], [])
    assert rec.best.metrics["consume_rate"].n == 9
    assert (
        rec.history
        == "Ranked on the runs of all 3 sweeps of this history: cmx trend finds no change of consume_rate in it."
    )

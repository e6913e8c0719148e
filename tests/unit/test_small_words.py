"""Small words a new user met (issue 51): `heartbeat=120`, not the stored `120.0`; the built-in
inventory said without its site-packages path. Pure, or one `cmx plan` (about 2 s)."""

from __future__ import annotations

from cmx.engine.model.cells import value_text
from tests.conftest import cmx, write


def test_a_whole_float_reads_as_the_file_wrote_it():
    assert value_text(120.0) == "120" and value_text(0.5) == "0.5" and value_text(True) == "true"
    assert value_text({"visibility_timeout": 60.0}) == "{visibility_timeout: 60}"


def test_plan_says_heartbeat_120(tmp_path):
    path = write(
        tmp_path / "hb.yaml",
        """
        name: hb
        workload: {name: throughput, params: {tasks: 10}}
        fixed: {backend: none, heartbeat: 120}
        matrix: {pool: [threads, solo]}
        """,
    )
    p = cmx("plan", str(path))
    assert p.returncode == 0, p.stderr
    assert "heartbeat=120," in p.stdout and "120.0" not in p.stdout


def test_the_reports_answer_says_tasks_lost_once(tmp_path):
    """Issue 51: 'Only cells with tasks_lost == 0 and tasks_failed == 0 and tasks_lost == 0'."""
    from cmx.analysis import report, views
    from tests.results_fixture import nightly

    where = {"tasks_lost": "== 0", "tasks_failed": "== 0"}
    path = nightly(
        tmp_path / "r.duckdb",
        [{"consume_rate": 100.0, "tasks_lost": 0.0, "tasks_failed": 0.0}],
        definition={"objective": {"maximize": "consume_rate", "where": where}},
    )
    with views.connect(path, read_only=True) as con:
        html, _ = report._answer(con, "e", 1, [])
    assert html.count("tasks_lost == 0") == 1 and "tasks_failed == 0" in html


def test_a_note_of_one_shape_is_said_once_a_sweep():
    """Issue 51: a replay `note:` printed ~20 times a night, its counts differing run to run."""
    from types import SimpleNamespace

    from cmx.engine.run.progress import new_notes

    handler = SimpleNamespace(notes_said=set())
    late = "driver sent {} of 20 replayed units more than 10 ms after their intended time"
    said = []
    for k in (3, 5, 3, 12):
        said += new_notes(handler, SimpleNamespace(notes=(late.format(k), "arrivals are receipts")))
    assert said == [late.format(3), "arrivals are receipts"]
    assert new_notes(handler, SimpleNamespace(notes=("fitted: app.a 40 tasks",))) == ["fitted: app.a 40 tasks"]


def test_captures_progress_is_whole_lines_in_a_log():
    """Issue 51: in a log file the capture's `\\r` updates became one huge line."""
    import io

    from cmx.engine.replay.capture import LOG_EVERY_S, progress_printer

    log = io.StringIO()
    say, every = progress_printer(log)
    say("capturing: 10 events")
    say("capturing: 20 events")
    assert log.getvalue() == "capturing: 10 events\ncapturing: 20 events\n" and every == LOG_EVERY_S

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    say, every = progress_printer(term)
    say("capturing: 10 events")
    assert term.getvalue() == "\rcapturing: 10 events" and every == 1.0


def test_an_ambiguous_column_says_which_table_to_name(tmp_path):
    """Issue 51: the docs' SQL style over tasks and runs hit `Ambiguous reference to column name
    "finished_at"` with no word of why."""
    from tests.results_fixture import add_run

    from cmx.engine.results import db

    path = tmp_path / "r.duckdb"
    with db.connect(path) as con:
        add_run(con, "e", "r1", {"pool": "threads"}, tasks=[("t1", 1.0, 1.5, 2.0, "SUCCESS")])
    query = "SELECT pool, median(finished_at - started_at) FROM tasks JOIN runs USING (run_id) GROUP BY ALL"
    p = cmx("sql", query, "--db", str(path))
    assert p.returncode == 2 and "Ambiguous reference" in p.stderr
    assert "t.finished_at - t.started_at for tasks joined as t" in p.stderr and "runs and tasks both have" in p.stderr
    fixed = "SELECT r.pool, median(t.finished_at - t.started_at) FROM tasks t JOIN runs r USING (run_id) GROUP BY ALL"
    assert cmx("sql", fixed, "--db", str(path)).returncode == 0


def test_trend_after_the_first_night_says_there_is_nothing_to_compare_with(tmp_path):
    """Issue 51: after the first night `cmx trend --fail-on worse` said "3 run(s) at the latest
    point would allow one", though no earlier night exists."""
    from tests.results_fixture import history

    path = history(tmp_path / "r.duckdb", [100.0])
    p = cmx("trend", "e", "--fail-on", "worse", "--db", str(path))
    assert p.returncode == 0, p.stderr
    assert "no verdict yet: every series has one point" in p.stderr and "would allow" not in p.stderr

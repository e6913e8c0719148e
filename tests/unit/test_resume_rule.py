"""When `cmx run` resumes: only after an unfinished sweep; a finished one is a point of history."""

from __future__ import annotations

from cmx.engine.results import db


def sweep(
    con, sweep_id: str, planned: int | None, runs: list[tuple[str, int, str | None]], resumes=None, started: int = 0
) -> None:
    db.record_sweep(
        con, sweep_id, "e", "e.yaml", "throughput", "", "inv", {}, {"revision": 1}, planned=planned, resumes=resumes
    )
    con.execute(
        "UPDATE sweeps SET started_at = to_timestamp(?) WHERE sweep_id = ?", [1_700_000_000 + started, sweep_id]
    )
    for cell, repeat, status in runs:
        run_id = f"{sweep_id}-{cell}-{repeat}"
        db.record_run_start(
            con,
            experiment="e",
            sweep_id=sweep_id,
            run_id=run_id,
            cell_id=cell,
            repeat=repeat,
            workload="throughput",
            dims={"pool": "solo"},
            params={},
            warmup_s=0,
        )
        if status:
            db.record_run_end(con, run_id, status, None, {})


def test_resume_only_an_unfinished_sweep(tmp_path):
    with db.connect(tmp_path / "r.duckdb") as con:
        assert db.resume_point(con, "e", 1) == (None, set())  # nothing stored
        sweep(con, "s1", 3, [("a", 1, "ok"), ("b", 1, "failed"), ("c", 1, "timeout")], started=1)
        assert db.resume_point(con, "e", 1) == (None, set())  # every run ended: finished, measure again
        sweep(con, "s2", 3, [("a", 1, "ok"), ("b", 1, "interrupted")], started=2)  # Ctrl-C
        assert db.resume_point(con, "e", 1) == ("s2", {("a", 1)})
        sweep(con, "s3", 2, [("b", 1, "ok")], resumes="s2", started=3)  # killed controller: c never started
        assert db.resume_point(con, "e", 1) == ("s2", {("a", 1), ("b", 1)})  # still the point of s2
        sweep(con, "s4", 1, [("c", 1, None)], resumes="s2", started=4)  # a run with no end at all
        assert db.resume_point(con, "e", 1) == ("s2", {("a", 1), ("b", 1)})
        sweep(con, "s5", 1, [("c", 1, "ok")], resumes="s2", started=5)
        assert db.resume_point(con, "e", 1) == (None, set())  # finished: the next run is a new point
        assert db.point_sweeps(con, "s2") == ["s2", "s3", "s4", "s5"]
        sweep(con, "s6", 3, [("a", 1, "timeout")], started=6)  # on_error: abort after a timeout
        assert db.resume_point(con, "e", 1) == ("s6", set())
        assert db.resume_point(con, "e", 2) == (None, set())  # another revision has its own history


def test_a_sweep_stored_before_planned_was_recorded_is_finished_unless_a_run_has_no_ok_end(tmp_path):
    with db.connect(tmp_path / "r.duckdb") as con:
        sweep(con, "old", None, [("a", 1, "ok"), ("b", 1, "ok")])
        assert db.resume_point(con, "e", 1) == (None, set())
        sweep(con, "old2", None, [("a", 1, "ok"), ("b", 1, "interrupted")], started=1)
        assert db.resume_point(con, "e", 1) == ("old2", {("a", 1)})


def test_an_aborted_sweep_is_resumed_even_when_its_last_run_was_the_one_that_failed(tmp_path):
    """on_error: abort stops at the first run that is not ok; when that is the last planned run,
    every run has an end, yet the sweep was cut short: the next `cmx run` resumes it (a host that
    dropped, brought back, finishes the rest) rather than measuring it all again."""
    with db.connect(tmp_path / "r.duckdb") as con:
        db.record_sweep(
            con, "s1", "e", "e.yaml", "throughput", "", "inv", {"on_error": "abort"}, {"revision": 1}, planned=2
        )
        for cell, status in (("a", "ok"), ("b", "failed")):
            db.record_run_start(
                con,
                experiment="e",
                sweep_id="s1",
                run_id=f"s1-{cell}",
                cell_id=cell,
                repeat=1,
                workload="throughput",
                dims={"pool": "solo"},
                params={},
                warmup_s=0,
            )
            db.record_run_end(con, f"s1-{cell}", status, None, {})
        assert db.resume_point(con, "e", 1) == ("s1", {("a", 1)})
        # The same runs under on_error: continue make a finished sweep: measured again.
        db.record_sweep(
            con, "s2", "e", "e.yaml", "throughput", "", "inv", {"on_error": "continue"}, {"revision": 1}, planned=2
        )
        con.execute("UPDATE sweeps SET started_at = started_at + INTERVAL 1 SECOND WHERE sweep_id = 's2'")
        for cell, status in (("a", "ok"), ("b", "failed")):
            db.record_run_start(
                con,
                experiment="e",
                sweep_id="s2",
                run_id=f"s2-{cell}",
                cell_id=cell,
                repeat=1,
                workload="throughput",
                dims={"pool": "solo"},
                params={},
                warmup_s=0,
            )
            db.record_run_end(con, f"s2-{cell}", status, None, {})
        assert db.resume_point(con, "e", 1) == (None, set())

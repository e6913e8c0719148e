"""The replay workload's plan (workloads/catalog/replay_plan.py): recorded sequence, children, inferred
chords, names subset, speed, and fitted arrivals and runtimes with known answers."""

from __future__ import annotations

import pytest

from cmx.workloads.catalog import replay_plan as plan


def row(uuid, name, sent, runtime=0.02, parent=None, end=None, args=4, kwargs=2, queue="q"):
    return {
        "uuid": uuid,
        "name": name,
        "queue": queue,
        "sent": sent,
        "started": sent + 0.001,
        "succeeded": end if end is not None else sent + 0.001 + runtime,
        "failed": None,
        "runtime": runtime,
        "parent_id": parent,
        "args_bytes": args,
        "kwargs_bytes": kwargs,
    }


# What a real capture of chord([a, a, a])(b), chain(a, b, b), a.delay() looked like (a solo worker):
# the chord's header members are root tasks sent 8-12 ms apart, its body a child of the last to end.
CANVAS = [
    row("h1", "app.a", 100.000, end=100.063),
    row("h2", "app.a", 100.012, end=100.123),
    row("h3", "app.a", 100.020, end=100.239),
    row("c1", "app.a", 100.028, end=100.297, args=2),
    row("body", "app.b", 100.222, parent="h3", args=12),
    row("c2", "app.b", 100.280, parent="c1"),
    row("c3", "app.b", 100.500, parent="c2"),
    row("solo", "app.a", 101.000),
    row("unlock", "celery.chord_unlock", 100.3),
]


def test_exact_keeps_offsets_children_and_infers_the_chord():
    units = plan.exact(CANVAS)
    assert [round(u.at, 3) for u in units] == [0.0, 0.028, 1.0]
    chord, chain, solo = units
    assert [c.name for c in chord.calls] == ["app.a"] * 3 and chord.body.name == "app.b"
    assert chord.body.payload_bytes == 14
    assert chain.body is None and [c.name for c in chain.calls] == ["app.a"]
    assert chain.calls[0].children[0].children[0].name == "app.b"  # c1 -> c2 -> c3
    assert solo.count() == 1
    assert sum(u.count() for u in units) == 8  # every recorded task but Celery's own


def test_names_subset_and_speed():
    units = plan.exact(CANVAS, names=["app.a"], speed=2.0)
    # without the b tasks there is no chord and no chain: each a at its recorded offset, halved
    assert [round(u.at, 3) for u in units] == [0.0, 0.006, 0.01, 0.014, 0.5]
    assert all(u.body is None and u.count() == 1 for u in units)
    # without their a parents, body and c2 are roots; c3 stays c2's child
    assert sum(u.count() for u in plan.exact(CANVAS, names=["app.b"])) == 3


def test_a_child_whose_parent_did_not_end_last_is_not_a_chord_body():
    rows = [row("x1", "a", 0.0, end=0.5), row("x2", "a", 0.01, end=0.2), row("y", "b", 0.6, parent="x2")]
    units = plan.exact(rows)  # Celery's chord body is sent by the header that ends last: x1 did
    assert all(u.body is None for u in units) and units[1].calls[0].children[0].name == "b"


def test_a_chain_after_a_slow_burst_is_not_a_chord():
    rows = [row("x1", "a", 0.0, end=5.0), row("x2", "a", 0.01, end=5.1), row("y", "b", 0.5, parent="x2")]
    units = plan.exact(rows)  # x1 had not finished when y was sent: y is x2's child, not a chord body
    assert all(u.body is None for u in units)
    assert units[1].calls[0].children[0].name == "b"


def test_fitted_draws_the_captured_rate_and_runtimes():
    rows = [row(f"t{i}", "svc", i * 0.01, runtime=0.05 * (1 + (i % 7) / 10)) for i in range(2000)]
    units, fits = plan.fitted(rows, seed=1)
    n = len(units)
    assert abs(n - 2000) < 4 * 2000**0.5  # Poisson at the captured 100/s over 20 s
    assert fits["svc"]["rate_per_s"] == pytest.approx(100.0, rel=0.01)
    assert fits["svc"]["runtime"]["dist"] == "lognorm"
    runtimes = sorted(u.calls[0].runtime for u in units)
    assert runtimes[n // 2] == pytest.approx(0.065, rel=0.1)
    doubled, _ = plan.fitted(rows, rate=2.0, speed=2.0, seed=1)
    assert abs(len(doubled) - 4000) < 4 * 4000**0.5
    assert max(u.at for u in doubled) <= 10.0


def test_resolve_looks_in_each_folder(tmp_path):
    (tmp_path / "shipped").mkdir()
    (tmp_path / "shipped" / "p.parquet").write_bytes(b"x")
    assert plan.resolve("data/p.parquet", [tmp_path / "nowhere", tmp_path / "shipped"]).parent.name == "shipped"
    with pytest.raises(FileNotFoundError):
        plan.resolve("q.parquet", [tmp_path])


def test_without_sent_events_arrivals_are_receipts():
    rows = [dict(row("a", "x", 0.0), sent=None, received=10.0), dict(row("b", "x", 0.0), sent=None, received=10.5)]
    assert [u.at for u in plan.exact(rows)] == [0.0, 0.5]


def test_each_recorded_queue_is_routed_to_a_queue_of_the_run():
    rows = [
        row("a", "x", 0.0, queue="emails"),
        row("b", "y", 0.1, queue="pdf/render"),
        row("c", "y", 0.2, parent="a", queue="pdf/render"),
        row("d", "z", 0.3, queue=None),
    ]
    assert plan.recorded_queues(rows) == ["emails", "pdf/render"]
    assert plan.recorded_queues(rows, names=["x"]) == ["emails"]
    units = plan.exact(rows)
    plan.route(units, "cmx.R")
    assert [u.calls[0].queue for u in units] == ["cmx.R.q.emails", "cmx.R.q.pdf_render", "cmx.R"]
    assert units[0].calls[0].children[0].queue == "cmx.R.q.pdf_render"


def steady_with_chains(lead):
    """16 tasks a second for 20 s as an app sends them (issue 40's outside check): a root every 60 ms,
    ending 5 ms later, and every tenth a chain a -> b (b sent as a ends); ``lead`` is each row's
    args_lead_list (cmx capture reads it off the events' args), or the column's absence."""
    rows = []
    for i in range(333):
        at = 10.0 + i * 0.06
        rows.append(row(f"r{i}", "shop.add" if i % 10 else "shop.a", at, runtime=0.005))
        if i % 10 == 0:
            rows.append(row(f"b{i}", "shop.b", at + 0.007, parent=f"r{i}", runtime=0.01))
    rows.sort(key=lambda r: r["sent"])
    return [r | ({"args_lead_list": lead} if lead != "absent" else {}) for r in rows]


def test_chains_in_steady_traffic_are_chains_once_their_args_are_known():
    units = plan.exact(steady_with_chains(None))
    assert all(u.body is None for u in units)  # no chord: every task at its own recorded time
    assert len(units) == 333 and sum(u.count() for u in units) == 367
    assert [round(u.at, 3) for u in units] == [round(i * 0.06, 3) for i in range(333)]
    # a profile written before the column falls back on timing, where 33 of the 34 chains read as chords
    # (the first has no root before it)
    assert sum(u.body is not None for u in plan.exact(steady_with_chains("absent"))) == 33


def test_a_chord_body_takes_as_many_header_members_as_results_it_received():
    rows = [r | {"args_lead_list": 3 if r["uuid"] == "body" else None} for r in CANVAS]
    chord, chain, solo = plan.exact(rows)
    assert [c.name for c in chord.calls] == ["app.a"] * 3 and chord.body.name == "app.b"
    assert chain.calls[0].children[0].children[0].name == "app.b" and solo.count() == 1
    # a stranger sent amid the header and ended before the body: the body's three results pick the
    # tightest run of three around its parent, the stranger stays a task of its own
    stranger = row("s", "app.z", 100.013, end=100.05) | {"args_lead_list": None}
    units = plan.exact(sorted([*rows, stranger], key=lambda r: r["sent"]))
    chords = [u for u in units if u.body is not None]
    assert len(chords) == 1 and len(chords[0].calls) == 3 and sum(u.count() for u in units) == 9
    # the body received two results only: a chord of two, the third a task of its own
    two = [r | {"args_lead_list": 2} if r["uuid"] == "body" else r for r in rows]
    assert [len(u.calls) for u in plan.exact(two) if u.body is not None] == [2]


def test_a_limit_adds_the_first_unit_of_each_name_it_leaves_out():
    """A smoke (limit 20) replayed 2 of 3 task names and said nothing (issue 51): the first N units,
    then each name's first unit, sent right after them, and the names added."""
    rows = [row(f"a{i}", "app.a", 100.0 + i) for i in range(5)]
    rows += [row("b0", "app.b", 200.0), row("c0", "app.c", 300.0), row("c1", "app.c", 301.0)]
    units = plan.exact(rows)
    kept, added = plan.limited(units, 2)
    assert added == ["app.b", "app.c"]
    assert [c.name for u in kept for c in u.calls] == ["app.a", "app.a", "app.b", "app.c"]
    assert [round(u.at, 3) for u in kept] == [0.0, 1.0, 1.01, 1.02]  # seconds, not at 100 s and 200 s
    assert plan.limited(units, 8) == (units, []) and plan.limited(units, None) == (units, [])
    assert plan.limited(units, 6)[1] == ["app.c"]

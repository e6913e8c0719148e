"""`cmx init NAME --from-profile` writes a replay experiment that `cmx validate` accepts, sized from the
profile; a replay experiment whose profile is missing is refused before anything runs."""

from __future__ import annotations

import yaml

from cmx.engine.replay import capture
from tests.conftest import cmx


def rows(n_fast=400, n_slow=40, chord=False):
    """A profile: fast tasks at 40/s taking 0.1 s, slow at 4/s taking 0.5 s (busy: 4 + 2 = 6 slots)."""
    out = []
    for i in range(n_fast):
        out.append(
            {
                "uuid": f"f{i}",
                "name": "app.fast",
                "queue": "q",
                "sent": 100 + i / 40,
                "runtime": 0.1,
                "started": 100 + i / 40,
                "succeeded": 100.1 + i / 40,
                "args_bytes": 10,
                "kwargs_bytes": 2,
            }
        )
    for i in range(n_slow):
        out.append(
            {
                "uuid": f"s{i}",
                "name": "app.slow",
                "queue": "q",
                "sent": 100 + i / 4,
                "runtime": 0.5,
                "started": 100 + i / 4,
                "succeeded": 100.5 + i / 4,
                "args_bytes": 10,
                "kwargs_bytes": 2,
            }
        )
    if chord:  # two header tasks sent together, a body sent after both ended (parent: the last one) with
        # their two results
        out += [
            {"uuid": "h1", "name": "app.fast", "sent": 200.0, "started": 200.0, "succeeded": 200.1, "runtime": 0.1},
            {"uuid": "h2", "name": "app.fast", "sent": 200.01, "started": 200.01, "succeeded": 200.2, "runtime": 0.1},
            {"uuid": "b", "name": "app.sum", "sent": 200.25, "parent_id": "h2", "runtime": 0.01, "args_lead_list": 2},
        ]
    return [{c: r.get(c) for c in capture.COLUMNS} for r in out]


def test_init_from_profile_writes_a_valid_replay_sweep(tmp_path):
    capture.write_profile(rows(), tmp_path / "data" / "traffic.parquet")
    made = cmx("init", "shop", "--from-profile", "data/traffic.parquet", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    path = tmp_path / "experiments" / "shop.yaml"
    exp = yaml.safe_load(path.read_text())
    assert exp["workload"]["name"] == "replay"
    assert exp["workload"]["params"]["profile"] == "../data/traffic.parquet"
    assert exp["matrix"]["concurrency"] == [6, 12, 24]
    assert set(exp["matrix"]) == {"pool", "concurrency", "prefetch_multiplier"}
    assert exp["objective"]["minimize"] == "latency_p99_s"
    assert exp["fixed"]["backend"] == "none"
    valid = cmx("validate", str(path), cwd=tmp_path)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    again = cmx("init", "shop", "--from-profile", "data/traffic.parquet", cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr


def test_a_chord_in_the_profile_asks_for_a_backend(tmp_path):
    capture.write_profile(rows(chord=True), tmp_path / "p.parquet")
    assert cmx("init", "c", "--from-profile", "p.parquet", "--dir", ".", cwd=tmp_path).returncode == 0
    assert yaml.safe_load((tmp_path / "c.yaml").read_text())["fixed"]["backend"] == "redis"
    shown = cmx("profile", "show", "p.parquet", cwd=tmp_path)
    assert shown.returncode == 0 and "440 single tasks" in shown.stdout and "1 chords" in shown.stdout, shown.stdout


def test_missing_profile_is_refused_by_init_and_validate(tmp_path):
    made = cmx("init", "x", "--from-profile", "none.parquet", cwd=tmp_path)
    assert made.returncode == 2 and "no such profile" in made.stderr and "Traceback" not in made.stderr
    (tmp_path / "r.yaml").write_text(
        "name: r\nrepeats: 1\nworkload:\n  name: replay\n"
        "  params: {profile: gone.parquet}\n"
        "fixed: {broker: redis, backend: none, pool: threads, concurrency: 2}\n"
    )
    valid = cmx("validate", "r.yaml", cwd=tmp_path)
    assert valid.returncode == 2 and "gone.parquet" in valid.stderr and "cmx capture" in valid.stderr


def test_replay_names_must_be_recorded_and_the_profile_a_profile(tmp_path):
    capture.write_profile(rows(), tmp_path / "p.parquet")
    (tmp_path / "bad.parquet").write_text("not parquet")
    body = (
        "name: r\nrepeats: 1\nworkload:\n  name: replay\n  params: {{profile: {p}, names: {n}}}\n"
        "fixed: {{broker: redis, backend: none, pool: threads, concurrency: 2}}\n"
    )
    (tmp_path / "r.yaml").write_text(body.format(p="p.parquet", n="[app.fast, app.nope]"))
    valid = cmx("validate", "r.yaml", cwd=tmp_path)
    assert valid.returncode == 2 and "'app.nope' not in the profile" in valid.stderr, valid.stderr
    assert "r.yaml:5:" in valid.stderr  # FILE:LINE:COL of the names
    (tmp_path / "r.yaml").write_text(body.format(p="bad.parquet", n="[app.fast]"))
    valid = cmx("validate", "r.yaml", cwd=tmp_path)
    assert valid.returncode == 2 and "not a cmx profile" in valid.stderr and "Traceback" not in valid.stderr
    (tmp_path / "r.yaml").write_text(body.format(p="p.parquet", n="[app.fast]"))
    assert cmx("validate", "r.yaml", cwd=tmp_path).returncode == 0

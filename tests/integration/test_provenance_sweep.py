"""Provenance and revisions on a real tiny sweep: what a sweep stores about itself, and a changed
definition kept apart from the runs of the earlier one."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import REPO, cmx, query, write

pytestmark = pytest.mark.integration

SECRETS = ("Kx7-redis-secret-91", "Pq2-postgres-secret-55", "guest:guest")

EXPERIMENT = """
    name: prov
    workload: {name: throughput, params: {tasks: TASKS, mode: backlog}}
    fixed: {broker: redis, pool: solo, concurrency: 1}
    limits: {run_timeout: 2m}
"""


def test_a_changed_definition_is_a_new_revision_and_the_sweep_says_what_ran(tmp_path):
    # The default inventory plus passwords cmx reads but this sweep needs not: they must stay out.
    inv = tmp_path / "inv.yml"
    inv.write_text(
        (REPO / "inventory" / "local.yml")
        .read_text()
        .replace(
            "        localhost:\n          broker_url:",
            f"        localhost:\n          redis_password: {SECRETS[0]}\n          postgres_password: {SECRETS[1]}\n"
            "          broker_url:",
            1,
        )
    )
    assert SECRETS[0] in inv.read_text()
    exp = write(tmp_path / "prov.yaml", EXPERIMENT.replace("TASKS", "50"))
    db = tmp_path / "results" / "cmx.duckdb"

    first = cmx("run", str(exp), "--db", str(db), "-i", str(inv), timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    [(version, commit, dirty, def_hash, inv_hash, revision)] = query(
        db, "SELECT cmx_version, git_commit, git_dirty, definition_hash, inventory_hash, revision FROM sweeps"
    )
    shown = cmx("--version")
    assert shown.returncode == 0 and shown.stdout.startswith(f"cmx {version}"), shown.stdout + shown.stderr
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert commit == (head.stdout.strip() if head.returncode == 0 else None)
    assert (dirty is None) == (commit is None)
    assert re.fullmatch(r"[0-9a-f]{64}", def_hash) and re.fullmatch(r"[0-9a-f]{64}", inv_hash)
    assert revision == 1
    stored = query(db, "SELECT string_agg(CAST(s AS VARCHAR), ' ') FROM sweeps s")[0][0]
    stored += " ".join(str(r) for r in query(db, "SELECT * FROM runs"))
    for secret in SECRETS:
        assert secret not in stored

    # The same definition, its sweep finished, is measured again (one more point of history in the
    # same revision); a changed one is refused, nothing is stored.
    again = cmx("run", str(exp), "--db", str(db), "-i", str(inv), timeout=600)
    assert again.returncode == 0 and "already stored as ok" not in again.stdout, again.stdout + again.stderr
    write(exp, EXPERIMENT.replace("TASKS", "60"))
    refused = cmx("run", str(exp), "--db", str(db), "-i", str(inv))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip() == (
        f"{exp}: experiment 'prov' has runs in {db} under another definition (revision 1): pass --new-revision "
        "to start revision 2 beside them, or give the experiment another name, or pass another --db"
    )
    assert query(db, "SELECT count(*), count(DISTINCT revision) FROM sweeps") == [(2, 1)]
    assert query(db, "SELECT count(*), count(DISTINCT sweep_id) FROM run_starts") == [(2, 2)]

    second = cmx("run", str(exp), "--db", str(db), "-i", str(inv), "--new-revision", timeout=600)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert query(db, """SELECT revision, status, "params.tasks" FROM runs ORDER BY revision""") == [
        (1, "ok", 50),
        (1, "ok", 50),
        (2, "ok", 60),
    ]
    hashes = query(db, "SELECT revision, definition_hash, inventory_hash FROM sweeps ORDER BY started_at")
    assert [r for r, _, _ in hashes] == [1, 1, 2]
    assert hashes[1][1] == def_hash and hashes[2][1] != def_hash and hashes[2][2] == inv_hash

    # Status counts each revision apart; the report shows the latest and says so.
    status = cmx("status", "--db", str(db))
    assert status.returncode == 0
    assert re.search(r"prov\s*│\s*2\s*│\s*1\s*│\s*1\s*│", status.stdout) and re.search(
        r"prov\s*│\s*1\s*│\s*2\s*│\s*2\s*│", status.stdout
    ), status.stdout
    out = tmp_path / "report"
    report = cmx("report", "prov", "--db", str(db), "--out", str(out))
    assert report.returncode == 0, report.stderr
    assert "revision 2, 1 cells, 1 runs" in report.stdout
    assert "Revision 2 of 2, the latest" in (out / "index.html").read_text()
    older = cmx("report", "prov", "--db", str(db), "--out", str(tmp_path / "r1"), "--revision", "1")
    assert older.returncode == 0 and "revision 1, 1 cells, 2 runs" in older.stdout, older.stderr
    missing = cmx("report", "prov", "--db", str(db), "--revision", "3")
    assert missing.returncode == 2 and "has no revision 3" in missing.stderr

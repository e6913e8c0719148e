"""The fast publisher's ids are what ``str(uuid.uuid4())`` gives: version 4, RFC 4122 variant, unique."""

from __future__ import annotations

import uuid

from cmx.workloads.servers.base import new_ids


def test_new_ids_are_random_version_4_uuids():
    ids = new_ids(20_000)
    assert len(set(ids)) == len(ids) == 20_000
    for i in ids:
        u = uuid.UUID(i)
        assert str(u) == i and u.version == 4 and u.variant == uuid.RFC_4122
    # every hex digit shows up in every random position (none stuck at a constant)
    for pos in (0, 9, 15, 20, 24, 35):
        assert len({i[pos] for i in ids}) == 16
    assert {i[19] for i in ids} <= set("89ab") and {i[14] for i in ids} == {"4"}

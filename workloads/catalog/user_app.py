"""The user's own Celery app in a run: what its configuration was, and what the harness overrode.

Written as ``app-config.json`` in the run dir of every host that built the app (kept with the
run's artifacts): the user's own settings (secrets masked as Celery masks them) and, for each
setting the harness or the cell set, the user's value and the run's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from celery import Celery
from celery.app.utils import filter_hidden_settings

from cmx.workloads.runtime.files import write_atomic


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr))


def own_settings(app: Celery, overrides: dict[str, Any], run_dir: Path) -> dict:
    """Record the user's settings and the ones ``overrides`` replaces (call before applying them)."""
    theirs = filter_hidden_settings(dict(app.conf.table(with_defaults=False)))
    masked = filter_hidden_settings({k: app.conf.get(k) for k in overrides})
    ours = filter_hidden_settings(dict(overrides))
    overridden = {
        k: {"yours": _plain(masked[k]), "run": _plain(ours[k])}
        for k in overrides
        if _plain(app.conf.get(k)) != _plain(overrides[k])
    }
    record = {"app": app.main, "settings": _plain(theirs), "overridden": overridden}
    write_atomic(Path(run_dir) / "app-config.json", json.dumps(record, indent=2, sort_keys=True))
    return record

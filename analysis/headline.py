"""Which metrics an experiment's user cares about: its headline, the one set that may alarm and gate.

The workload's own headline metrics, as each run stored them (table ``run_headlines``, written by
the engine with the run's start: :mod:`cmx.engine.results.headlines`; analysis never imports a
workload class nor runs a user's code), the experiment's ``objective:`` (a metric, or
``{maximize|minimize: METRIC}``) and every metric its ``thresholds:`` name, as the sweep stored its
definition. ``cmx trend`` groups every other metric by
:func:`cmx.engine.results.metricdefs.group_of` (other, harness, noise): shown, never gating.
A run stored without a headline (a user's workload class, by a cmx before 0.3) has none: its
tables show every judged metric.
"""

from __future__ import annotations

import json


def _lists(rows) -> list[str]:
    """The metrics of JSON lists, each once, in the order first seen."""
    names: list[str] = []
    for (text,) in rows:
        names += [m for m in (json.loads(text) if isinstance(text, str) else text or []) if m not in names]
    return names


def of_runs(con, run_ids: list[str]) -> list[str]:
    """The whole headline of these runs' workloads (each workload's order; workloads by name)."""
    return _lists(
        con.execute(
            """SELECT any_value(h.headline_all) FROM run_headlines h JOIN run_starts s USING (run_id)
                                 WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY s.workload
                                 ORDER BY s.workload""",
            [list(run_ids)],
        ).fetchall()
    )


def of_experiment_runs(con, experiment: str) -> list[str]:
    """The whole headline of the workloads an experiment's runs ran (the summary table's columns)."""
    return _lists(
        con.execute(
            """SELECT any_value(h.headline_all) FROM run_headlines h JOIN run_starts s USING (run_id)
                                 WHERE s.experiment = ? GROUP BY s.workload ORDER BY s.workload""",
            [experiment],
        ).fetchall()
    )


def of_cells(con, experiment: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """{cell_id: (its headline for its params, its workload's whole headline)} of every cell stored with one."""
    rows = con.execute(
        """SELECT s.cell_id, any_value(h.headline), any_value(h.headline_all)
                          FROM run_headlines h JOIN run_starts s USING (run_id) WHERE s.experiment = ?
                          GROUP BY s.cell_id""",
        [experiment],
    ).fetchall()
    return {cell: (tuple(json.loads(shown)), tuple(json.loads(whole))) for cell, shown, whole in rows}


def objective_of_runs(con, experiment: str, revision: int) -> str | None:
    """The objective the workload of the experiment's latest sweep of ``revision`` ranks on, as stored."""
    row = con.execute(
        """SELECT h.objective FROM run_headlines h JOIN run_starts s USING (run_id)
                         JOIN sweeps w USING (sweep_id) WHERE s.experiment = ? AND coalesce(w.revision, 1) = ?
                         ORDER BY w.started_at DESC LIMIT 1""",
        [experiment, revision],
    ).fetchone()
    return row[0] if row else None


def _declared(definition: dict | None) -> set[str]:
    """The metrics a sweep's definition names: its objective's and its thresholds'."""
    definition = definition or {}
    names: set[str] = set()
    objective = definition.get("objective")
    if isinstance(objective, str):
        names.add(objective)
    elif isinstance(objective, dict):
        names.update(v for k, v in objective.items() if k in ("maximize", "minimize") and isinstance(v, str))
    names.update(k for k in (definition.get("thresholds") or {}) if isinstance(k, str))
    return names


def of_experiment(con, experiment: str, revision: int) -> frozenset[str]:
    """The headline of an experiment's revision: the headlines its runs stored (each cell's, for its
    params) and their workload's objective, with the metrics its latest sweep's definition names."""
    row = con.execute(
        """SELECT definition FROM sweeps WHERE experiment = ? AND coalesce(revision, 1) = ?
                         ORDER BY started_at DESC LIMIT 1""",
        [experiment, revision],
    ).fetchone()
    if row is None:
        return frozenset()
    stored = con.execute(
        """SELECT DISTINCT h.headline, h.objective FROM run_headlines h
                            JOIN run_starts s USING (run_id) JOIN sweeps w USING (sweep_id)
                            WHERE s.experiment = ? AND coalesce(w.revision, 1) = ?""",
        [experiment, revision],
    ).fetchall()
    names = set(_lists([(shown,) for shown, _ in stored])) | {objective for _, objective in stored if objective}
    definition = row[0]
    return frozenset(names | _declared(json.loads(definition) if isinstance(definition, str) else definition))


def chosen_for_runs(con, run_ids: list[str]) -> list[str]:
    """What a comparison of these runs shows by default: the objective first (the one their sweeps'
    definitions name, else the one their workloads rank on), then each run's headline for its
    params and the metrics the definitions' thresholds name; [] when none of it was stored."""
    ids = [list(run_ids)]
    definitions = con.execute(
        """SELECT DISTINCT w.definition FROM sweeps w JOIN run_starts s USING (sweep_id)
                             WHERE s.run_id IN (SELECT unnest(?::VARCHAR[]))""",
        ids,
    ).fetchall()
    declared: list[str] = []
    for (text,) in definitions:
        definition = json.loads(text) if isinstance(text, str) else text
        objective = (definition or {}).get("objective")
        if isinstance(objective, str):
            declared.append(objective)
        elif isinstance(objective, dict):
            declared += [v for k, v in objective.items() if k in ("maximize", "minimize") and isinstance(v, str)]
    stored = con.execute(
        """SELECT DISTINCT objective FROM run_headlines WHERE run_id IN (SELECT unnest(?::VARCHAR[]))
                            AND objective IS NOT NULL ORDER BY objective""",
        ids,
    ).fetchall()
    objectives = declared or [o for (o,) in stored]
    shown = _lists(
        con.execute(
            """SELECT any_value(headline) FROM run_headlines WHERE run_id IN (SELECT unnest(?::VARCHAR[]))
                             GROUP BY headline ORDER BY headline""",
            ids,
        ).fetchall()
    )
    thresholds = sorted({m for (text,) in definitions for m in _declared(_loaded(text))} - set(declared))
    if not shown and not objectives:
        return []
    return list(dict.fromkeys([*objectives, *shown, *thresholds]))


def _loaded(text) -> dict | None:
    return json.loads(text) if isinstance(text, str) else text

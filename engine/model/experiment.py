"""The experiment: its pydantic model (what a valid file is, once loaded) and durations.

``load_experiment`` (engine/model/load.py) builds it from a file, reporting every problem at once
as ``FILE:LINE:COL: message``; the dimension sections' values are checked by
engine/model/checks.py, their names and values by engine/model/dimensions.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from cmx.engine import limits
from cmx.engine.model import thresholds as threshold_rules
from cmx.workloads import faults

# --------------------------------------------------------------------------- durations

# One reader of durations for the file and the fault dimension (workloads/faults/ ships to hosts).
parse_duration = faults.parse_duration


# --------------------------------------------------------------------------- models

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Limits(BaseModel):
    """Per-run limits, in seconds (the file may say ``10m``, ``5s``, ``250ms``)."""

    model_config = _FROZEN

    # The descriptions are the file's documentation: `cmx schema` (editors) and the reference page read them.
    run_timeout: float = Field(
        600.0,
        gt=0,
        le=limits.MAX_DURATION_S,
        description=("a run still going after this long is stopped and stored as timeout"),
    )
    warmup: float = Field(
        0.0,
        ge=0,
        le=limits.MAX_DURATION_S,
        description=("tasks sent within this long of the first send are left out of rates and latencies"),
    )
    settle: float = Field(
        limits.DEFAULT_SETTLE_S,
        gt=0,
        le=limits.MAX_DURATION_S,
        description=(
            "a fault run ends once this long passed without a task finishing (after its last fault); "
            "longer than a task, or the tasks still running count as lost"
        ),
    )
    fault_restart: float = Field(
        limits.DEFAULT_FAULT_RESTART_S,
        ge=0,
        le=limits.MAX_DURATION_S,
        description=(
            "seconds after a killed or stopped worker exited before its replacement starts (as systemd's RestartSec)"
        ),
    )
    max_runs: int | None = Field(
        None,
        ge=1,
        strict=True,
        description=("a racing sweep's budget: it ends, undecided, once it has run this many runs"),
    )
    max_time: float | None = Field(
        None,
        gt=0,
        description=(
            "a racing sweep's budget: it ends, undecided, once this long has passed since its first run started"
        ),
    )

    @field_validator("run_timeout", "warmup", "settle", "fault_restart", "max_time", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float | None:
        return None if value is None else parse_duration(value)


#: ``repeats: N``: every cell N times.
FixedRepeats = Annotated[int, Field(ge=1, le=limits.MAX_REPEATS, strict=True)]


class Racing(BaseModel):
    """``repeats: {min: 3, max: 10, until: decided}``: every cell gets ``min`` runs, then after each
    round the cells shown worse than the best on the objective (or out of its ``where``) stop, and
    the rest get one more run each, until the best is decided or ``max`` (analysis/racing.py)."""

    model_config = _FROZEN

    min: int = Field(3, ge=2, le=limits.MAX_REPEATS, strict=True, description="runs every cell gets first")
    max: int = Field(10, ge=2, le=limits.MAX_REPEATS, strict=True, description="the most runs a cell gets")
    until: Literal["decided"] = Field(
        "decided", description=("stop giving a cell runs once it is shown worse than the best on the objective")
    )

    @model_validator(mode="after")
    def _ordered(self):
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


def _pep508(item: str) -> str:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(item)
    except InvalidRequirement as exc:
        raise ValueError(f"{item!r} is not a requirement such as pillow==11.0.0 ({str(exc).splitlines()[0]})") from None
    return item


class WorkloadSpec(BaseModel):
    """Which registered workload runs, and its params shared by every cell."""

    model_config = _FROZEN

    name: str
    params: dict[str, Any] = Field(
        {}, description=("the workload's params shared by every cell (a param is also a dimension: params.NAME)")
    )
    requirements: list[Annotated[str, AfterValidator(_pep508)]] = Field(
        [],
        description=(
            "what your tasks need on the hosts (pillow==11.0.0): downloaded into the wheelhouse on the "
            "controller, installed from it there, unpacked on the hosts (which need no package index)"
        ),
    )


class Experiment(BaseModel):
    """One experiment file, validated. ``source`` is the file it came from (set by the loader)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="unique in the results database")
    description: str = Field("", description="what the experiment asks (stored with each sweep: sweeps.description)")
    #: engine/hosts/inventory.py: choose_inventory.
    inventory: str | None = Field(
        None,
        description=(
            "the Ansible inventory, relative to this file's folder; none named: --inventory, else "
            "./inventory/local.yml, else the built-in localhost inventory"
        ),
    )
    repeats: Annotated[
        Annotated[FixedRepeats, Tag("fixed")] | Annotated[Racing, Tag("race")],
        Discriminator(lambda v: "race" if isinstance(v, (dict, Racing)) else "fixed"),
    ] = Field(1, description="runs a cell: a number, or a race ({min, max, until: decided})")
    workload: WorkloadSpec = Field(description="which workload runs, its params and requirements")
    fixed: dict[str, Any] = {}
    matrix: dict[str, list[Any]] = {}
    zip: list[dict[str, list[Any]]] = []
    exclude: list[dict[str, Any]] = []
    include: list[dict[str, Any]] = []
    limits: Limits = Field(Limits(), description="per-run limits (durations: 10m, 5s, 250ms)")
    on_error: Literal["continue", "abort"] = Field(
        "continue",
        description=(
            "after a failed run: go on with the sweep, or stop it (an aborted sweep is resumed by the next cmx run)"
        ),
    )
    #: METRIC: "OP NUMBER[UNIT]", checked per cell when a sweep ends (engine/model/thresholds.py).
    thresholds: dict[str, Annotated[str, BeforeValidator(threshold_rules.valid)]] = {}
    objective: (
        str
        | dict[
            Literal["maximize", "minimize", "where"],
            str | dict[str, Annotated[str, BeforeValidator(threshold_rules.valid)]],
        ]
        | None
    ) = Field(
        None,
        description=(
            "what racing, cmx recommend and the report rank cells on: a metric (its registry's direction), or "
            "{maximize: METRIC} / {minimize: METRIC}, optionally with where: {METRIC: 'OP VALUE'} constraints a "
            "cell must meet; default the workload's own objective"
        ),
    )
    source: str = ""

    @field_validator("objective")
    @classmethod
    def _one_objective(cls, value):
        if isinstance(value, dict):
            directions = [k for k in value if k != "where"]
            if (
                len(directions) != 1
                or not isinstance(value[directions[0]], str)
                or not isinstance(value.get("where", {}), dict)
            ):
                raise ValueError(
                    "objective: one of {maximize: METRIC} or {minimize: METRIC} (with an optional "
                    "where: {METRIC: \"OP VALUE\"}), or a metric name"
                )
        return value

    def objective_parts(self) -> tuple[str | None, str | None, dict[str, str]]:
        """(maximize | minimize | None when only a metric is named, the metric or None, the where constraints)."""
        if self.objective is None:
            return None, None, {}
        if isinstance(self.objective, str):
            return None, self.objective, {}
        ((direction, metric),) = ((k, v) for k, v in self.objective.items() if k != "where")
        return direction, metric, dict(self.objective.get("where") or {})

    @property
    def racing(self) -> Racing | None:
        return self.repeats if isinstance(self.repeats, Racing) else None

    @property
    def max_repeats(self) -> int:
        """The most runs a cell can get: the repeats, or a race's max."""
        return self.repeats.max if isinstance(self.repeats, Racing) else self.repeats

    def repeats_text(self) -> str:
        r = self.racing
        return f"{r.min}–{r.max} repeats (racing)" if r else f"{self.repeats} repeat{'' if self.repeats == 1 else 's'}"

    def parsed_thresholds(self) -> dict[str, threshold_rules.Threshold]:
        return {metric: threshold_rules.parse(text) for metric, text in self.thresholds.items()}


#: Keys a file may use at each level (``source`` is the loader's, never the file's).
ALLOWED_KEYS: dict[tuple, list[str]] = {
    (): [f for f in Experiment.model_fields if f != "source"],
    ("workload",): list(WorkloadSpec.model_fields),
    ("limits",): list(Limits.model_fields),
    ("repeats",): list(Racing.model_fields),
}

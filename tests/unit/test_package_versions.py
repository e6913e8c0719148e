"""``package.NAME`` dimensions without a host: the names and values validation takes, the JSON
Schema, how a version matches what a process imported, what the worker's and the driver's checks
say, and the requirements of a version set's environment (pip fits a chosen package's own
requirements, the rest keep the controller's pins)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import jsonschema
import pytest

from cmx.engine.hosts.provision import environment_pins, version_set_key
from cmx.engine.model import packages
from cmx.engine.model.dimensions import name_problem, normalise_value
from cmx.engine.model.schema import experiment_schema
from cmx.workloads.vocab.dimensions import package_versions, version_matches
from cmx.workloads.app.driver import PackageMismatch, check_packages
from cmx.workloads.drive.workerwatch import mismatches, wanted_config
from cmx.workloads.runtime.spec import RunSpec


def test_package_names_are_the_packages_every_process_reports():
    assert name_problem("package.celery", None) is None and name_problem("package.redis", None) is None
    problem = name_problem("package.kombo", None)
    assert "unknown package 'package.kombo'" in problem and "did you mean 'package.kombu'?" in problem
    assert "package.NAME" in name_problem("pakage.celery", None)


@pytest.mark.parametrize(
    "value, canonical", [("5.5.3", "5.5.3"), (" 5.6 ", "5.6"), (">=5.5,<5.6", ">=5.5,<5.6"), ("~=5.5.0", "~=5.5.0")]
)
def test_a_version_or_a_specifier_is_taken(value, canonical):
    assert normalise_value("package.celery", value, None) == canonical


@pytest.mark.parametrize(
    "value, said",
    [
        (5.5, "quote it"),
        (5, "quote it"),
        ("foo", "neither a version"),
        ("", "neither a version"),
        ("=>5", "neither a version"),
    ],
)
def test_anything_else_is_refused_in_one_line(value, said):
    with pytest.raises(ValueError) as info:
        normalise_value("package.celery", value, None)
    assert said in str(info.value) and "\n" not in str(info.value)


def test_the_schema_takes_a_version_string_only():
    validator = jsonschema.Draft202012Validator(experiment_schema())
    doc = {
        "name": "x",
        "workload": {"name": "throughput", "params": {"tasks": 1}},
        "matrix": {"package.celery": ["5.5.3", "5.7.0"]},
        "fixed": {"package.kombu": ">=5.5"},
    }
    assert list(validator.iter_errors(doc)) == []
    assert list(validator.iter_errors({**doc, "matrix": {"package.celery": [5.5]}}))
    assert list(validator.iter_errors({**doc, "matrix": {"package.nope": ["1"]}}))


def test_a_version_matches_as_pep_440_compares():
    assert version_matches("5.5.3", "5.5.3") and version_matches("5.5", "5.5.0")
    assert not version_matches("5.5.3", "5.7.0") and not version_matches("5.5.3", None)
    assert version_matches(">=5.5,<5.6", "5.5.4") and not version_matches(">=5.5,<5.6", "5.6.0")


def test_the_worker_and_the_driver_name_package_wanted_and_got():
    spec = RunSpec(
        run_id="r",
        experiment="e",
        cell_id="c",
        repeat=1,
        workload="throughput",
        packages=package_versions({"package.celery": "5.5.3", "pool": "solo"}),
    )
    want = wanted_config(spec)
    assert want["package.celery"] == "5.5.3"
    assert mismatches({"package.celery": "5.5.3"}, {"package.celery": "5.5.3"}) == []
    assert mismatches({"package.celery": "5.5.3"}, {"package.celery": "5.7.0"}) == [
        "cell asks package.celery '5.5.3'; worker runs '5.7.0'"
    ]
    check_packages(spec, {"celery": "5.5.3"})
    with pytest.raises(PackageMismatch, match=r"cell asks package.celery '5.5.3'; driver runs '5.7.0'"):
        check_packages(spec, {"celery": "5.7.0"})


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(
            f"{name}-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{meta}"
        )
    return path


def test_an_environment_fits_what_the_chosen_version_requires(tmp_path, monkeypatch):
    monkeypatch.setenv("CMX_PACKAGE_CACHE", str(tmp_path / "cache"))
    _wheel(
        tmp_path / "cache",
        "celery",
        "5.5.3",
        ["kombu<5.6,>=5.5.2", "billiard<5.0,>=4.2.1", 'pytest-celery[all]>=1.2; extra == "pytest"'],
    )
    assert packages.resolve("celery", "5.5.3")[0] == "5.5.3"  # found here: the index is not asked
    pins = ["celery==5.7.0", "kombu==5.7.0", "billiard==4.3.2", "redis==8.1.0", "pytest==9.0"]
    assert environment_pins(pins, {"celery": "5.5.3"}) == [
        "celery==5.5.3",
        "kombu",
        "billiard",
        "redis==8.1.0",
        "pytest==9.0",
    ]
    assert version_set_key({"kombu": "5.5.4", "celery": "5.5.3"}) == "celery=5.5.3,kombu=5.5.4"

"""Whether the registry has the versions a file's ``package.NAME`` dimensions ask for: checked
with the rest of the file, before any host is touched.

A version is looked for first among the wheels already on this machine (the cache below, filled
by earlier checks; the sweep's wheelhouses), then on the package index by
``pip download --no-deps`` into the cache, bounded by ``limits.PACKAGE_LOOKUP_TIMEOUT_S``. So
``cmx validate`` asks the index once per version, and a controller offline still validates
(and builds its environments from, engine/hosts/provision.py) the versions it has seen.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Iterable

from cmx.engine import limits
from cmx.engine.paths import user_cache
from cmx.workloads.vocab.dimensions import version_matches


def cache_dir() -> Path:
    """The controller's cache of the wheels of chosen versions (``CMX_PACKAGE_CACHE`` or
    ``$XDG_CACHE_HOME/cmx/packages``)."""
    if os.environ.get("CMX_PACKAGE_CACHE"):
        return Path(os.environ["CMX_PACKAGE_CACHE"])
    return user_cache("packages")


def _wheels(name: str, dirs: Iterable[Path]) -> dict[str, Path]:
    """{version: wheel} of ``name`` among the wheels in ``dirs`` (each dir and its subfolders one deep)."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    found: dict[str, Path] = {}
    for folder in dirs:
        for wheel in [*folder.glob("*.whl"), *folder.glob("*/*.whl")]:
            try:
                wname, wversion, _, _ = parse_wheel_filename(wheel.name)
            except InvalidWheelFilename:
                continue
            if wname == canonicalize_name(name):
                found.setdefault(str(wversion), wheel)
    return found


def _best(name: str, spec: str, dirs: Iterable[Path]) -> tuple[str, Path] | None:
    from packaging.version import Version

    matching = {v: w for v, w in _wheels(name, dirs).items() if version_matches(spec, v)}
    if not matching:
        return None
    newest = max(matching, key=Version)
    return newest, matching[newest]


def _requirement(name: str, spec: str) -> str:
    return f"{name}=={spec}" if spec[:1].isdigit() else f"{name}{spec}"


def resolve(name: str, spec: str, dirs: Iterable[Path] = ()) -> tuple[str, Path]:
    """``(version, wheel)``: the version of package ``name`` that ``spec`` selects and its wheel on
    this machine. A version (``5.5.3``) found among the wheels here is not asked of the index again;
    a specifier set (``>=5.5,<5.6``) asks the index for its newest match, falling back on the wheels
    here when the index cannot be reached. ValueError with a one-line reason when there is none."""
    cache = cache_dir()
    dirs = [cache, *dirs]
    exact = spec[:1].isdigit()
    here = _best(name, spec, dirs)
    if exact and here:
        return here
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--retries",
        "0",
        "--timeout",
        "10",
        "-d",
        str(cache),
        *[arg for d in dirs if d.is_dir() for arg in ("--find-links", str(d))],
        _requirement(name, spec),
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=limits.PACKAGE_LOOKUP_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        if here:
            return here
        raise ValueError(
            f"package.{name}: looking up {name} {spec} on the package index took more than "
            f"{limits.PACKAGE_LOOKUP_TIMEOUT_S:g}s, and no wheel of it is on this machine"
        ) from None
    found = _best(name, spec, [cache])
    if proc.returncode == 0 and found:
        return found
    if here:  # the index is out of reach: the wheels here do
        return here
    raise ValueError(f"package.{name}: {_why(name, spec, proc.stderr)}")


def _why(name: str, spec: str, stderr: str) -> str:
    listed = re.search(r"\(from versions: ([^)]*)\)", stderr)
    if listed:
        versions = [v.strip() for v in listed.group(1).split(",") if v.strip() and v.strip() != "none"]
        newest = ", ".join(reversed(versions[-5:])) if versions else "none"
        return f"no version {spec} of {name} on the package index or in the wheelhouse (newest: {newest})"
    last = (stderr.strip().splitlines() or ["pip failed"])[-1].removeprefix("ERROR: ")
    return (
        f"{name} {spec} is not in the wheelhouse and the package index did not answer: {last[:200]} "
        f"(cache: {cache_dir()})"
    )


def requires(wheel: Path) -> list[str]:
    """The names of the packages ``wheel`` requires on this Python (extras left out)."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as zf:
        meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
        lines = zf.read(meta).decode(errors="replace").splitlines() if meta else []
    names = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or ("extra" not in str(req.marker) and req.marker.evaluate()):
                names.append(req.name)
    return names

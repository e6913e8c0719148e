"""What the controller builds for its hosts, once per content: the wheelhouse of the pinned host
requirements, the environment installed from it (``site-packages``, byte code compiled), and the
shipped code (``cmx.workloads`` and the user's), its byte code compiled too.

Hosts may reach no package index, and a pip install plus a compile on every host cost each one
about 8 s of CPU (and ensurepip 3 s more): eight fresh hosts sharing a lab machine's cores spent
minutes on it. So pip installs the wheelhouse here, once, into a scratch venv, and every host
unpacks the result into its own venv (``roles/python_env``). That is what pip would have put there:
the host's Python has the wheelhouse's X.Y (the role asserts it) and the wheels are the
controller's platform's, as they were when hosts ran pip themselves.
"""

from __future__ import annotations

import hashlib
import os
import py_compile
import shutil
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from importlib.util import cache_from_source
from pathlib import Path

from cmx.engine.errors import HostError
from cmx.engine.paths import WORKLOADS as WORKLOADS_SRC

_CMX_INIT = b'"""cmx as shipped to a host: only cmx.workloads."""\n'
#: The last member of a code archive (its name): a host's code folder that has it holds it all.
CODE_MARK = ".cmx-code"
#: The last member of a site archive: its name, then the pins it was built for. A host whose
#: ``site-packages`` has it holds that whole archive (tar extracts in order; roles/python_env reads it).
SITE_MARK = ".cmx-site"


def python_version() -> str:
    return "%d.%d" % sys.version_info[:2]


def house_name(pins: list[str]) -> str:
    """The wheelhouse of ``pins``, named by its content (the environment built from it on a host too)."""
    return f"py{python_version()}-" + hashlib.sha256("\n".join([python_version(), *pins]).encode()).hexdigest()[:12]


def build_wheelhouse(root: Path, pins: list[str]) -> Path:
    """Download the wheels for ``pins`` (and their dependencies) once; reused while pins are equal.
    The wheels of chosen package versions (engine/model/packages.py) are found offline too."""
    from cmx.engine.model.packages import cache_dir

    house = root / house_name(pins)
    if (house / ".complete").exists():
        return house
    # Built beside its final name, renamed when complete: two sweeps never see half of one.
    part = house.with_name(f"{house.name}.part-{os.getpid()}")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    try:
        links = ["--find-links", str(cache_dir())] if cache_dir().is_dir() else []
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            *links,
            "-d",
            str(part),
            *pins,
        ]
        _pip(cmd, house)
        extra = _patch_release_requirements(part)
        if extra:
            _pip(cmd[: cmd.index("-d") + 2] + extra, house)
        (part / ".complete").write_text("\n".join(pins) + "\n")
        if house.exists() and not (house / ".complete").exists():  # an unfinished one of an older cmx
            shutil.rmtree(house, ignore_errors=True)
        try:
            part.rename(house)
        except OSError:  # another sweep finished the same wheelhouse first
            if not (house / ".complete").exists():
                raise
    finally:
        shutil.rmtree(part, ignore_errors=True)
    return house


def _pip(cmd: list[str], house: Path, installing: bool = False) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["pip failed"]
        # A conflict (package.kombu 5.5 beside the controller's celery) is said on the lines above the last.
        conflict = [ln.strip() for ln in lines if "conflict is caused by" in ln or " depends on " in ln]
        last = "; ".join(conflict[:4]) if conflict else lines[-1]
        if installing:
            raise HostError(
                f"installing the wheelhouse {house} for the hosts failed: {last} "
                "(pip 22.3 or newer installs with --python)"
            )
        raise HostError(
            f"building the wheelhouse in {house} failed: {last} "
            "(the controller needs a package index or a pip cache holding these wheels)"
        )


def _patch_release_requirements(house: Path) -> list[str]:
    """Requirements the wheels declare for an earlier patch release of our Python (redis-py wants
    async-timeout below 3.11.3, say): pip resolved for the controller's exact version, but a host
    (Debian's 3.11.2) installs offline and needs them too."""
    import zipfile

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    have = {canonicalize_name(w.name.split("-")[0]) for w in house.glob("*.whl")}
    env = {"python_full_version": "%d.%d.0" % sys.version_info[:2]}
    wanted = set()
    for wheel in house.glob("*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
            lines = zf.read(meta).decode(errors="replace").splitlines() if meta else []
        for line in lines:
            if not line.startswith("Requires-Dist:"):
                continue
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or "extra" in str(req.marker) or canonicalize_name(req.name) in have:
                continue
            if req.marker.evaluate(env):
                wanted.add(f"{req.name}{req.specifier}")
    return sorted(wanted)


#: glibc of the legacy manylinux tags (PEP 600's manylinux_X_Y says it itself).
_LEGACY_GLIBC = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def host_needs(houses: list[Path]) -> dict[str, str]:
    """What a host must be to run the wheels of ``houses``, as pip checked when hosts installed:
    the controller's platform (``sysconfig.get_platform()``: ``linux-x86_64``) where any wheel is
    built for one, and the newest glibc a manylinux wheel asks (each wheel: the oldest of its
    tags); '' where nothing asks. roles/python_env compares them with the host's."""
    platform, glibc = "", (0, 0)
    for wheel in (w for house in houses for w in house.glob("*.whl")):
        tags = wheel.name[:-4].split("-")[-1].split(".")
        if tags == ["any"]:
            continue
        platform = sysconfig.get_platform()
        asked = []
        for tag in tags:
            m = re.match(r"manylinux_(\d+)_(\d+)_", tag)
            legacy = next((v for k, v in _LEGACY_GLIBC.items() if tag.startswith(k + "_")), None)
            asked += [(int(m[1]), int(m[2]))] if m else [legacy] if legacy else []
        glibc = max(glibc, min(asked, default=(0, 0)))
    return {"platform": platform, "glibc": "%d.%d" % glibc if glibc > (0, 0) else ""}


def site_archive(root: Path, pins: list[str]) -> Path:
    """``<house>.site.tar``: the ``site-packages`` of a venv holding every wheel of the wheelhouse of
    ``pins`` (async-timeout for a host's earlier patch release too), its byte code compiled;
    :data:`SITE_MARK` last. Made ``--without-pip``: a host never runs pip. Built once per wheelhouse."""
    house = build_wheelhouse(root, pins)
    archive = house.with_name(house.name + ".site.tar")
    if archive.exists():
        return archive
    with tempfile.TemporaryDirectory(prefix=f"{house.name}.site-", dir=root) as scratch:
        venv = Path(scratch) / "venv"
        made = subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True, text=True
        )
        if made.returncode != 0:
            last = (made.stderr.strip() or "venv failed").splitlines()[-1]
            raise HostError(f"making a scratch venv in {scratch} failed: {last}")
        _pip(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(venv / "bin" / "python"),
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-index",
                "--no-deps",
                "--no-compile",
                *map(str, sorted(house.glob("*.whl"))),
            ],
            house,
            installing=True,
        )
        site = venv / "lib" / f"python{python_version()}" / "site-packages"
        # Every core; a file that does not compile (a package's test data) is never imported by a run.
        subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(site)], capture_output=True)
        (site / SITE_MARK).write_text("\n".join([archive.name, *pins]) + "\n")
        tmp = archive.with_name(f"{archive.name}.tmp-{os.getpid()}")
        try:
            with tarfile.open(tmp, "w") as tar:
                tar.add(site, arcname="site-packages", filter=lambda t: None if t.name.endswith(SITE_MARK) else t)
                tar.add(site / SITE_MARK, arcname=f"site-packages/{SITE_MARK}")
            os.replace(tmp, archive)
        finally:
            tmp.unlink(missing_ok=True)
    return archive


def _skipped(parts: tuple[str, ...]) -> bool:
    """Byte-code caches and hidden entries (.git, .venv…) of the user's folders stay home."""
    return any(part == "__pycache__" or (part.startswith(".") and part not in (".", "..")) for part in parts)


def _add_with_byte_code(tar: tarfile.TarFile, src: Path, arcname: str, scratch: Path) -> None:
    """``src`` (a file or folder) as ``arcname``, each ``.py`` with its byte code beside it, as an
    import would have written it (the run's processes write none on a host)."""
    if src.is_dir():
        tar.add(src, arcname=arcname, recursive=False)
    for f in sorted(src.rglob("*")) if src.is_dir() else [src]:
        rel = f.relative_to(src).as_posix() if src.is_dir() else ""
        if _skipped(Path(rel).parts):
            continue
        name = f"{arcname}/{rel}" if rel else arcname
        tar.add(f, arcname=name, recursive=False)
        if f.suffix == ".py" and f.is_file():
            pyc = scratch / "out.pyc"
            try:
                py_compile.compile(str(f), cfile=str(pyc), dfile=name, doraise=True)
            except py_compile.PyCompileError:
                continue  # it fails on the host as it would here; the import says so
            tar.add(pyc, arcname=cache_from_source(name))


def workloads_archive(root: Path, user_code: dict[str, Path] | None = None) -> Path:
    """The workloads package as shipped to hosts, with the user's code (``cmx_user/<name>`` ->
    source file or folder, see engine/model/user_code.py) and the byte code of both, named by
    the code's content so hosts see changes."""
    user_code = user_code or {}
    # Its .pyc are this X.Y's, and its last member is CODE_MARK: the name says both.
    digest = hashlib.sha256(f"byte code for {python_version()}, {CODE_MARK} last\n".encode())
    for f in sorted(WORKLOADS_SRC.rglob("*.py")):
        digest.update(f.relative_to(WORKLOADS_SRC).as_posix().encode() + f.read_bytes())
    for name, src in sorted(user_code.items()):
        for f in sorted(src.rglob("*") if src.is_dir() else [src]):
            if f.is_file() and not _skipped(f.relative_to(src.parent).parts):
                digest.update(name.encode() + f.relative_to(src.parent).as_posix().encode() + f.read_bytes())
    root.mkdir(parents=True, exist_ok=True)
    archive = root / f"workloads-{digest.hexdigest()[:12]}.tar"
    if archive.exists():
        return archive
    tmp = archive.with_name(f"{archive.name}.tmp-{os.getpid()}")
    try:
        with tempfile.TemporaryDirectory() as scratch, tarfile.open(tmp, "w") as tar:
            # cmx/ is a regular package on hosts (only cmx.workloads ships), so nothing else named
            # cmx on a host's path can shadow or extend it.
            init = Path(scratch) / "__init__.py"
            init.write_bytes(_CMX_INIT)
            _add_with_byte_code(tar, init, "cmx/__init__.py", Path(scratch))
            _add_with_byte_code(tar, WORKLOADS_SRC, "cmx/workloads", Path(scratch))
            for name, src in sorted(user_code.items()):
                _add_with_byte_code(tar, src, name, Path(scratch))
            mark = Path(scratch) / CODE_MARK  # last: an unpacking cut short is unpacked again
            mark.write_text(archive.name + "\n")
            tar.add(mark, arcname=CODE_MARK)
        os.replace(tmp, archive)
    finally:
        tmp.unlink(missing_ok=True)
    return archive

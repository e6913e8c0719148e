"""What a host must be to run the compiled wheels the controller installed for it: the platform
and the newest glibc they ask, read from the wheels' own tags (roles/python_env checks them)."""

from __future__ import annotations

import sysconfig

from cmx.engine.hosts.wheelhouse import host_needs


def _house(path, *wheels):
    path.mkdir(parents=True)
    for name in wheels:
        (path / name).write_bytes(b"")
    return path


def test_pure_python_wheels_ask_nothing(tmp_path):
    house = _house(tmp_path / "a", "celery-5.7.0-py3-none-any.whl", "vine-5.1.0-py3-none-any.whl")
    assert host_needs([house]) == {"platform": "", "glibc": ""}


def test_the_newest_glibc_any_wheel_asks_each_wheel_by_its_oldest_tag(tmp_path):
    a = _house(
        tmp_path / "a",
        "celery-5.7.0-py3-none-any.whl",
        # runs on glibc 2.17 (either tag will do for pip): asks 2.17, not 2.28
        "psutil-7.2.2-cp36-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.manylinux_2_28_x86_64.whl",
        "gevent-26.9.0-cp311-cp311-manylinux2010_x86_64.whl",
    )
    b = _house(tmp_path / "b", "pydantic_core-2.50.5-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert host_needs([a]) == {"platform": sysconfig.get_platform(), "glibc": "2.17"}
    assert host_needs([a, b])["glibc"] == "2.28"  # a package.* environment's wheels count too


def test_a_platform_wheel_without_a_glibc_tag_asks_the_platform_only(tmp_path):
    house = _house(tmp_path / "a", "thing-1.0-cp311-cp311-linux_x86_64.whl")
    assert host_needs([house]) == {"platform": sysconfig.get_platform(), "glibc": ""}

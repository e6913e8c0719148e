"""A host already provisioned with the same content key is checked, not rebuilt; other code is
installed there as before.

One test host in a network namespace (tests/nethosts.py), reached over SSH, provisioned by the
engine's own code (engine/hosts/provision.py through ansible-runner).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from cmx.engine.hosts.connection import connections
from cmx.engine.hosts.inventory import load_inventory
from cmx.engine.hosts.provision import provision
from cmx.engine.hosts.wheelhouse import SITE_MARK
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("nethosts_can_be_made")]


def test_a_provisioned_host_is_checked_and_new_code_still_reaches_it(tmp_path):
    results = tmp_path / "results"
    hosts = tmp_path / "hosts"
    with NetHosts(tmp_path / "net", 1) as net:
        inv_path = net.inventory(
            tmp_path / "lab.yml", {g: ["h1"] for g in ("brokers", "drivers", "workers")}, workdir_root=hosts
        )
        inventory = load_inventory(inv_path, secrets_dir=results)
        seen = {}
        key, _ = provision(inventory, ["h1"], results, {}, on_result=seen.__setitem__)
        assert seen["provision.yml"].changed, "the first provisioning did nothing"
        assert (hosts / "h1" / "venv" / "bin" / "python").exists()
        assert (hosts / "h1" / "lib" / key / "cmx" / "workloads" / "__init__.py").exists()
        assert compiled_from_source(hosts / "h1", key) == [], "a run's processes would compile these at every start"

        # The full role would unpack the venv's packages again; a host holding the same key is only
        # checked, by one ssh round trip: no playbook runs (the role's own first task checks the key
        # too when one does: tests/integration/test_roles_converge.py).
        [mark] = (hosts / "h1" / "venv").glob(f"lib/python*/site-packages/{SITE_MARK}")
        shipped = mark.read_text()
        mark.unlink()
        conns = connections(inv_path, ["h1"])
        seen.clear()
        assert provision(inventory, ["h1"], results, {}, on_result=seen.__setitem__, conns=conns)[0] == key
        assert seen == {} and not mark.exists()

        # Other code (the user's tasks module) is another key: the round trip finds the host
        # without it, and the playbook gives it.
        user = tmp_path / "mytasks.py"
        user.write_text("X = 1\n")
        other, _ = provision(
            inventory,
            ["h1"],
            results,
            {},
            user_code={"cmx_user/mytasks.py": user},
            on_result=seen.__setitem__,
            conns=conns,
        )
        assert other != key and seen["provision.yml"].changed
        assert (hosts / "h1" / "lib" / other / "cmx_user" / "mytasks.py").read_text() == "X = 1\n"
        assert compiled_from_source(hosts / "h1", other, "cmx_user.mytasks") == []
        assert mark.read_text() == shipped  # the role found the packages gone and unpacked them again
        assert not list((hosts / "h1").rglob("*.tar"))  # nothing shipped is left behind


#: What a run's worker and driver import at their start (a Redis and an AMQP run, a backend).
RUN_IMPORTS = (
    "celery.bin.celery",
    "celery.concurrency.prefork",
    "celery.concurrency.thread",
    "kombu.transport.redis",
    "kombu.transport.pyamqp",
    "celery.backends.redis",
    "cmx.workloads.app.factory",
    "cmx.workloads.app.workerstop",
    "cmx.workloads.app.driver",
    "cmx.workloads.host.sampler",
    "cmx.workloads.host.agent",
)


def compiled_from_source(workdir, key: str, *more: str) -> list[str]:
    """The modules among what a run imports that the host has no valid byte code for (none, or
    one whose header names another source mtime or size: Python compiles those again too),
    imported the way the agent starts every process of a run (byte code read, never written)."""
    probe = (
        "import importlib, importlib.util, json, os, sys\n"
        "for name in sys.argv[1:]: importlib.import_module(name)\n"
        "def valid(src, pyc):\n"
        "    if not os.path.exists(pyc): return False\n"
        "    head, st = open(pyc, 'rb').read(16), os.stat(src)\n"
        "    return head[:4] == importlib.util.MAGIC_NUMBER and (int.from_bytes(head[4:8], 'little') & 1\n"
        "        or (int.from_bytes(head[8:12], 'little'), int.from_bytes(head[12:16], 'little'))\n"
        "        == (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF))\n"
        "print(json.dumps(sorted(n for n, m in list(sys.modules.items()) if getattr(m, '__spec__', None)"
        " and m.__spec__.cached and m.__spec__.origin.endswith('.py')"
        " and not valid(m.__spec__.origin, m.__spec__.cached))))"
    )
    out = subprocess.run(
        [str(workdir / "venv" / "bin" / "python"), "-c", probe, *RUN_IMPORTS, *more],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={"PYTHONPATH": str(workdir / "lib" / key), "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"},
    )
    return json.loads(out.stdout)


def test_a_host_of_another_platform_is_refused_before_anything_is_unpacked(tmp_path):
    """The controller's compiled wheels ask a platform and a glibc; a host that is not that fails
    provisioning naming itself and both, and gets nothing (pip refused such wheels when hosts
    installed them). Here the real role on this machine, told the wheels are for another one."""
    import dataclasses

    from cmx.engine.errors import HostError
    from cmx.engine.hosts.provision import prepare, provision_hosts
    from tests.hostseed import local_inventory

    inv = local_inventory(tmp_path / "inventory.yml", tmp_path / "host")
    results = tmp_path / "results"
    shipment = prepare(results)
    assert shipment.needs["platform"], "the controller's wheelhouse holds compiled wheels (gevent, psutil)"
    for needs, said in (
        ({"platform": "linux-armv7l", "glibc": ""}, "built for linux-armv7l"),
        ({**shipment.needs, "glibc": "9.99"}, "with glibc 9.99 or newer"),
    ):
        with pytest.raises(HostError) as err:
            provision_hosts(
                load_inventory(inv, secrets_dir=results),
                ["localhost"],
                results,
                dataclasses.replace(shipment, needs=needs),
            )
        assert "localhost: the environment's compiled packages are built for" in str(err.value), err.value
        assert said in str(err.value), err.value
        assert "run the sweep from a controller of the hosts' platform" in str(err.value)
        assert not (tmp_path / "host" / "venv").exists()

"""A host already provisioned with the same content key is checked, not rebuilt; other code is
installed there as before.

One test host in a network namespace (tests/nethosts.py), reached over SSH, provisioned by the
engine's own code (engine/hosts/provision.py through ansible-runner).
"""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from cmx.engine.hosts.connection import connections
from cmx.engine.hosts.inventory import load_inventory
from cmx.engine.hosts.provision import provision
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("nethosts_can_be_made")]


def test_a_provisioned_host_is_checked_and_new_code_still_reaches_it(tmp_path):
    results = tmp_path / "results"
    hosts = tmp_path / "hosts"
    with NetHosts(tmp_path / "net", 1) as net:
        inv_path = net.inventory(tmp_path / "lab.yml", {g: ["h1"] for g in ("brokers", "drivers", "workers")},
                                 workdir_root=hosts)
        inventory = load_inventory(inv_path, secrets_dir=results)
        seen = {}
        key, _ = provision(inventory, ["h1"], results, {}, on_result=seen.__setitem__)
        assert seen["provision.yml"].changed, "the first provisioning did nothing"
        assert (hosts / "h1" / "venv" / "bin" / "python").exists()
        assert (hosts / "h1" / "lib" / key / "cmx" / "workloads" / "__init__.py").exists()
        assert compiled_from_source(hosts / "h1", key) == [], "a run's processes would compile these at every start"

        # The full role would put the wheelhouse back; a host holding the same key is only checked,
        # by one ssh round trip: no playbook runs (the role's own first task checks the key too
        # when one does: tests/integration/test_roles_converge.py).
        shutil.rmtree(hosts / "h1" / "wheelhouse")
        conns = connections(inv_path, ["h1"])
        seen.clear()
        assert provision(inventory, ["h1"], results, {}, on_result=seen.__setitem__, conns=conns)[0] == key
        assert seen == {} and not (hosts / "h1" / "wheelhouse").exists()


        # Other code (the user's tasks module) is another key: the round trip finds the host
        # without it, and the playbook gives it.
        user = tmp_path / "mytasks.py"
        user.write_text("X = 1\n")
        other, _ = provision(inventory, ["h1"], results, {}, user_code={"cmx_user/mytasks.py": user},
                             on_result=seen.__setitem__, conns=conns)
        assert other != key and seen["provision.yml"].changed
        assert (hosts / "h1" / "lib" / other / "cmx_user" / "mytasks.py").read_text() == "X = 1\n"
        assert compiled_from_source(hosts / "h1", other, "cmx_user.mytasks") == []
        assert (hosts / "h1" / "wheelhouse").exists()


#: What a run's worker and driver import at their start (a Redis and an AMQP run, a backend).
RUN_IMPORTS = ("celery.bin.celery", "celery.concurrency.prefork", "celery.concurrency.thread", "kombu.transport.redis",
               "kombu.transport.pyamqp", "celery.backends.redis", "cmx.workloads.app", "cmx.workloads.workerstop",
               "cmx.workloads.drive.driver", "cmx.workloads.host.sampler", "cmx.workloads.host.agent")


def compiled_from_source(workdir, key: str, *more: str) -> list[str]:
    """The modules among what a run imports that the host's venv has no byte code for, imported
    the way the agent starts every process of a run (byte code read, never written)."""
    probe = ("import importlib, json, os, sys\n"
             "for name in sys.argv[1:]: importlib.import_module(name)\n"
             "print(json.dumps(sorted(n for n, m in list(sys.modules.items()) if getattr(m, '__spec__', None)"
             " and m.__spec__.cached and m.__spec__.origin.endswith('.py') and not os.path.exists(m.__spec__.cached))))")
    out = subprocess.run([str(workdir / "venv" / "bin" / "python"), "-c", probe, *RUN_IMPORTS, *more],
                         capture_output=True, text=True, timeout=120, check=True,
                         env={"PYTHONPATH": str(workdir / "lib" / key), "PYTHONDONTWRITEBYTECODE": "1",
                              "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout)

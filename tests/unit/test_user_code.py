"""The user's code on the controller: what is shipped, under which name, in a content-keyed archive."""

from __future__ import annotations

import tarfile
import textwrap
from importlib.util import cache_from_source

import pytest

from cmx.engine.model.load import load_experiment
from cmx.engine.model.cells import expand
from cmx.engine.hosts.wheelhouse import CODE_MARK, workloads_archive
from cmx.engine.model.user_code import sources
from cmx.workloads.catalog import usercode


def test_names_and_references():
    assert usercode.module_name("mytasks.py") == "mytasks"
    assert usercode.module_name("sub/pkg/") == "pkg"
    assert usercode.parse_object_ref("./my_workload.py:Chains") == ("./my_workload.py", "Chains")
    assert usercode.parse_object_ref("pkg.mod:app") == ("pkg.mod", "app")
    for bad in ("pkg.mod", "pkg.mod:", ":x", "a:1x"):
        with pytest.raises(ValueError):
            usercode.parse_object_ref(bad)


def test_every_module_a_cell_uses_is_shipped_by_its_own_name(tmp_path):
    (tmp_path / "a.py").write_text("from celery import shared_task\n\n@shared_task\ndef t():\n    pass\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        "from celery import shared_task\n\n@shared_task\ndef t():\n    pass\n"
    )
    exp_file = tmp_path / "e.yaml"
    exp_file.write_text(
        textwrap.dedent("""
        name: e
        workload: {name: tasks, params: {task: a.t}}
        zip: [{params.module: [a.py, pkg], params.task: [a.t, pkg.t]}]
    """)
    )
    exp = load_experiment(exp_file)
    assert sources(exp, expand(exp)) == {"cmx_user/a.py": tmp_path / "a.py", "cmx_user/pkg": tmp_path / "pkg"}


def test_the_archive_is_keyed_by_content_and_leaves_caches_and_hidden_files_home(tmp_path):
    pkg = tmp_path / "userpkg"
    for sub in (".git", "__pycache__"):
        (pkg / sub).mkdir(parents=True)
    (pkg / "__init__.py").write_text("x = 1\n")
    (pkg / "data.json").write_text("{}")
    (pkg / ".git" / "HEAD").write_text("ref")
    (pkg / "__pycache__" / "m.pyc").write_text("")
    code = {"cmx_user/userpkg": pkg}
    first = workloads_archive(tmp_path / "out", code)
    names = [n for n in tarfile.open(first).getnames() if not n.startswith("cmx/") and n != "cmx"]
    assert names.pop() == CODE_MARK  # last: a host's folder that has it holds the whole archive
    # The user's own byte code stays home; the archive's is compiled for the hosts' X.Y beside each source.
    assert names == [
        "cmx_user/userpkg",
        "cmx_user/userpkg/__init__.py",
        cache_from_source("cmx_user/userpkg/__init__.py"),
        "cmx_user/userpkg/data.json",
    ]
    assert workloads_archive(tmp_path / "out", code) == first
    (pkg / ".git" / "HEAD").write_text("another ref")
    assert workloads_archive(tmp_path / "out", code) == first
    (pkg / "data.json").write_text("{\"changed\": 1}")
    assert workloads_archive(tmp_path / "out", code) != first
    assert workloads_archive(tmp_path / "out") != first  # without user code: the plain package

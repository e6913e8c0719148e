"""Where the controller keeps the wheelhouses it builds: the user's cache, shared by every results
folder; the results folder's own where that cache cannot be written."""

from __future__ import annotations

from cmx.engine.hosts import provision


def test_wheelhouses_live_in_the_users_cache_shared_by_results_folders(tmp_path, monkeypatch):
    cache = tmp_path / "cache" / "wheelhouse"
    monkeypatch.setattr(provision, "WHEELHOUSES", cache)
    assert provision._wheelhouses(tmp_path / "a") == cache == provision._wheelhouses(tmp_path / "b")
    assert cache.is_dir()


def test_a_cache_that_is_a_file_falls_back_on_the_results_folder(tmp_path, monkeypatch):
    (tmp_path / "cache").write_text("not a folder")
    monkeypatch.setattr(provision, "WHEELHOUSES", tmp_path / "cache" / "wheelhouse")
    assert provision._wheelhouses(tmp_path / "results") == tmp_path / "results" / "wheelhouse"

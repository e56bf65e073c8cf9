"""Finding GGUF files: app folder, user folders, Hugging Face cache, LM Studio; broken files are
listed with their reason, and so are folders that cannot be read; linked folders are followed;
partial downloads are never listed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from app.errors import EMPTY_FILE
from app.paths import models_dir
from models.discovery import (
    SOURCE_APP,
    SOURCE_HF_CACHE,
    SOURCE_LMSTUDIO,
    ModelEntry,
    discover_models,
    scan_summary,
)
from tests.helpers.model_files import (
    hf_cache_layout,
    write_broken_files,
    write_tiny_gguf,
)


def _only_local(extra: list[Path], tmp_path: Path) -> dict[Path, ModelEntry]:
    entries = discover_models(
        extra, hf_cache=tmp_path / "no-hf-cache", lmstudio=[tmp_path / "no-lmstudio"]
    )
    return {e.path: e for e in entries}


def test_app_folder_lists_good_and_broken_files_and_skips_partials(tmp_path: Path) -> None:
    root = models_dir()
    good = write_tiny_gguf(root / "org" / "good.gguf")
    broken = write_broken_files(root / "broken")
    # Things a scan must not list: half-finished downloads and hidden folders.
    (root / "org" / ".good2.gguf.0123abcd.incomplete").write_bytes(b"GGUF")
    (root / "org" / "other.gguf.incomplete").write_bytes(b"GGUF")
    (root / "org" / "other.gguf.part").write_bytes(b"GGUF")
    (root / "org" / "quantizing.gguf.partial").write_bytes(b"GGUF")
    write_tiny_gguf(root / ".downloads" / "hidden.gguf")
    (root / "org" / "README.md").write_text("not a model")

    entries = discover_models(hf_cache=tmp_path / "none", lmstudio=[])
    by_name = {e.path.name: e for e in entries}
    assert set(by_name) == {"good.gguf", *broken}
    assert by_name["good.gguf"].ok and by_name["good.gguf"].path == good
    assert by_name["good.gguf"].source == SOURCE_APP and not by_name["good.gguf"].read_only
    for name, (_path, word) in broken.items():
        entry = by_name[name]
        assert entry.info is None and entry.error is not None and word in entry.error, name


def test_split_models_are_listed_once_and_orphan_parts_explained(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    first = write_tiny_gguf(folder / "split.gguf", split_max_tensors=2)
    orphan = write_tiny_gguf(folder / "lonely.gguf", split_max_tensors=2)
    orphan.unlink()  # part 1 gone, part 2 left behind
    entries = _only_local([folder], tmp_path)
    names = sorted(p.name for p in entries)
    assert names == ["lonely-00002-of-00002.gguf", "split-00001-of-00002.gguf"]
    assert entries[first].ok
    lonely = entries[folder / "lonely-00002-of-00002.gguf"]
    assert lonely.error == "part 1 of 2 is missing"


def test_the_same_file_is_listed_once_under_the_first_source(tmp_path: Path) -> None:
    write_tiny_gguf(models_dir() / "a.gguf")
    entries = discover_models([models_dir().parent], hf_cache=tmp_path / "x", lmstudio=[])
    assert [(e.path.name, e.source) for e in entries] == [("a.gguf", SOURCE_APP)]


def test_hugging_face_cache_and_lm_studio(tmp_path: Path) -> None:
    tiny = write_tiny_gguf(tmp_path / "src" / "tiny.gguf")
    cache = tmp_path / "hf" / "hub"
    hf_cache_layout(cache, "acme/Tiny-GGUF", {"tiny-q4_0.gguf": tiny, "README.md": tiny})
    lm = tmp_path / "lmstudio"
    write_tiny_gguf(lm / "publisher" / "Model-GGUF" / "model-q8_0.gguf")
    (lm / "publisher" / "Model-GGUF" / "model-q4.gguf.incomplete").write_bytes(b"x")

    entries = discover_models(include_app=False, hf_cache=cache, lmstudio=[lm, tmp_path / "nope"])
    assert [(e.path.name, e.source, e.repo_id, e.read_only, e.ok) for e in entries] == [
        ("tiny-q4_0.gguf", SOURCE_HF_CACHE, "acme/Tiny-GGUF", True, True),
        ("model-q8_0.gguf", SOURCE_LMSTUDIO, "publisher/Model-GGUF", True, True),
    ]


def test_a_broken_hub_cache_lists_what_it_can_and_says_why_of_the_rest(tmp_path: Path) -> None:
    tiny = write_tiny_gguf(tmp_path / "src" / "tiny.gguf")
    cache = tmp_path / "hf"
    snapshot = hf_cache_layout(cache, "acme/Tiny-GGUF", {"tiny-q4_0.gguf": tiny})
    # A blob deleted by hand: its snapshot link dangles.
    os.symlink("../../blobs/" + "f" * 64, snapshot / "gone-q8_0.gguf")
    # A repository folder that cannot be listed (its snapshots are not a folder).
    locked = cache / "models--acme--Locked"
    locked.mkdir()
    (locked / "snapshots").write_text("")
    # A second revision holding the same blob: listed once.
    again = snapshot.parent / ("b" * 40)
    again.mkdir()
    os.symlink(os.readlink(snapshot / "tiny-q4_0.gguf"), again / "tiny-q4_0.gguf")

    entries = discover_models(include_app=False, hf_cache=cache, lmstudio=[])
    by_name = {e.path.name: e for e in entries}
    assert sorted(by_name) == ["gone-q8_0.gguf", "models--acme--Locked", "tiny-q4_0.gguf"]
    assert by_name["tiny-q4_0.gguf"].ok and by_name["tiny-q4_0.gguf"].repo_id == "acme/Tiny-GGUF"
    gone = by_name["gone-q8_0.gguf"]
    assert not gone.ok and gone.repo_id == "acme/Tiny-GGUF"
    assert gone.error is not None and "deleted blob" in gone.error
    folder = by_name["models--acme--Locked"]
    assert folder.is_folder and folder.error is not None
    assert folder.error.startswith("cannot read this folder:")
    assert scan_summary(entries) == "2 files, 1 unusable, 1 folder unreadable"


def test_missing_or_odd_roots_never_crash_a_scan(tmp_path: Path) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    entries = discover_models(
        [tmp_path / "missing", a_file],
        include_app=False,
        hf_cache=a_file,  # a file where a folder should be
        lmstudio=[tmp_path / "missing-too"],
    )
    assert entries == []


def test_entry_to_dict_is_json_ready(tmp_path: Path) -> None:
    import json

    write_tiny_gguf(models_dir() / "a.gguf")
    (models_dir() / "b.gguf").write_bytes(b"")
    entries = discover_models(hf_cache=tmp_path / "x", lmstudio=[])
    data = json.loads(json.dumps([e.to_dict() for e in entries]))
    assert [(d["ok"], d["error"]) for d in data] == [(True, None), (False, EMPTY_FILE)]
    assert data[0]["info"]["vocab_size"] == 64


def test_linked_folders_are_followed_and_a_link_loop_ends(tmp_path: Path) -> None:
    """A library spread over disks by symlinks lists what they hold; each file once."""
    elsewhere = write_tiny_gguf(tmp_path / "other-disk" / "big.gguf")
    library = tmp_path / "library"
    write_tiny_gguf(library / "local.gguf")
    (library / "on-other-disk").symlink_to(elsewhere.parent, target_is_directory=True)
    (library / "on-other-disk" / "back").symlink_to(library, target_is_directory=True)
    entries = _only_local([library], tmp_path)
    assert sorted(p.name for p in entries) == ["big.gguf", "local.gguf"]
    assert all(e.ok for e in entries.values())


def test_an_unreadable_folder_is_listed_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    library = tmp_path / "library"
    write_tiny_gguf(library / "fine" / "a.gguf")
    locked = library / "locked"
    write_tiny_gguf(locked / "b.gguf")
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:  # chmod 000 does not stop root, who runs CI
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    entries = _only_local([library], tmp_path)
    assert sorted(p.name for p in entries) == ["a.gguf", "locked"]
    folder = entries[locked]
    assert folder.is_folder and not folder.ok
    assert folder.error == "cannot read this folder: Permission denied"
    assert scan_summary(list(entries.values())) == "1 file, 1 folder unreadable"
    # A library folder that cannot be listed at all says so too, rather than showing nothing.
    assert [(e.path, e.is_folder) for e in _only_local([locked], tmp_path).values()] == [
        (locked, True)
    ]


def test_the_scan_summary_counts_files_unusable_files_and_folders(tmp_path: Path) -> None:
    write_tiny_gguf(models_dir() / "a.gguf")
    (models_dir() / "b.gguf").write_bytes(b"")
    entries = discover_models(hf_cache=tmp_path / "x", lmstudio=[])
    assert scan_summary(entries) == "2 files, 1 unusable"
    assert scan_summary(entries[:1]) == "1 file"

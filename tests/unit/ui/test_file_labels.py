"""Files that read alike in the window's lists are told apart by their folders."""

from __future__ import annotations

from ui.file_labels import telling_folders
from ui.window.compare import compare_drafts
from ui.workers.catalog import Catalog, DraftOption, ModelFile


def test_only_labels_shared_by_two_files_get_folders() -> None:
    labels = ["small", "small", "mid"]
    paths = ["/hub/snapshots/1/small.gguf", "/lmstudio/a/b/small.gguf", "/m/mid.gguf"]
    assert telling_folders(labels, paths) == ["1", "b", None]


def test_folders_grow_until_every_copy_differs() -> None:
    paths = ["/x/snap/s.gguf", "/y/snap/s.gguf", "/z/s.gguf", "/s.gguf"]
    assert telling_folders(["s"] * 4, paths) == ["x/snap", "y/snap", "z", "/"]


def test_compare_gives_each_same_named_draft_its_own_label() -> None:
    target = ModelFile("/m/big.gguf", 500 * 2**20, "F32", "Big", "llama", "fp")
    drafts = [
        DraftOption(f"/{home}/snapshots/1/small.gguf", 2**20, "Q4_0", True, "ok", "ok")
        for home in ("hub", "lmstudio")
    ]
    choices = compare_drafts(Catalog([target], [], target, drafts))
    assert [c.label for c in choices] == [
        "hub/snapshots/1/small.gguf",
        "lmstudio/snapshots/1/small.gguf",
    ]

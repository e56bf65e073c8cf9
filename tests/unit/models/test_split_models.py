"""Split (multi-part) models: their verdict follows every part, and their size is all parts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.errors import ModelLoadError
from models.gguf import inspect_gguf
from tests.helpers.model_files import write_tiny_gguf


def _split(folder: Path) -> tuple[Path, list[Path]]:
    first = write_tiny_gguf(folder / "tiny.gguf", split_max_tensors=1, n_layers=2)
    parts = sorted(folder.glob("*.gguf"))
    assert len(parts) > 2 and parts[0] == first
    return first, parts


def test_a_part_that_goes_missing_is_seen_on_the_next_inspect(tmp_path: Path) -> None:
    first, parts = _split(tmp_path)
    inspect_gguf(first)
    parts[-1].rename(tmp_path / "away")
    with pytest.raises(ModelLoadError, match="is missing"):
        inspect_gguf(first)


def test_a_part_that_arrives_is_seen_on_the_next_inspect(tmp_path: Path) -> None:
    first, parts = _split(tmp_path)
    parts[-1].rename(tmp_path / "away")
    with pytest.raises(ModelLoadError, match="is missing"):
        inspect_gguf(first)
    (tmp_path / "away").rename(parts[-1])
    assert inspect_gguf(first).shard_count == len(parts)


def test_a_part_that_changes_updates_the_total_size(tmp_path: Path) -> None:
    first, parts = _split(tmp_path)
    before = inspect_gguf(first).total_size_bytes
    with parts[1].open("ab") as handle:
        handle.write(b"\0" * 4096)
    st = parts[1].stat()
    os.utime(parts[1], ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert inspect_gguf(first).total_size_bytes == before + 4096


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    """A split target, and a one-file draft bigger than its first part but smaller in all."""
    first = write_tiny_gguf(
        tmp_path / "t" / "target.gguf", split_max_tensors=1, n_layers=4, tensor_elements=4096
    )
    draft = write_tiny_gguf(tmp_path / "draft.gguf", n_layers=1, tensor_elements=4096)
    target = inspect_gguf(first)
    size = inspect_gguf(draft).total_size_bytes
    assert target.size_bytes < size < target.total_size_bytes
    return first, draft


def test_rank_drafts_weighs_a_split_target_by_all_its_parts(tmp_path: Path) -> None:
    from models.compat import rank_drafts

    first, draft = _pair(tmp_path)
    target = inspect_gguf(first)
    (verdict,) = rank_drafts(target, [inspect_gguf(draft)])
    assert verdict.smaller_than_target
    assert verdict.size_ratio == pytest.approx(draft.stat().st_size / target.total_size_bytes)


def test_an_added_file_smaller_than_a_split_target_becomes_the_draft(tmp_path: Path) -> None:
    from ui.workers.catalog import build_catalog, vet_new_file

    first, draft = _pair(tmp_path)
    assert vet_new_file(str(draft), str(first)).as_draft
    catalog = build_catalog([str(first), str(draft)], str(first))
    assert catalog.target is not None
    assert catalog.target.size_bytes == inspect_gguf(first).total_size_bytes
    assert [d.path for d in catalog.drafts if "%" in d.note] == [str(draft)]


def test_a_later_part_opened_alone_names_part_1(tmp_path: Path) -> None:
    first, parts = _split(tmp_path)
    second = parts[1]
    with pytest.raises(ModelLoadError) as caught:
        inspect_gguf(second)
    assert caught.value.reason.startswith("part 2 of a split model of ")
    assert f"open part 1 ({first.name})" in caught.value.reason

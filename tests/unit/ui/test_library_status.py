"""The Models dialog says why a readable GGUF file cannot be used: its header's verdict (no
weights, no vocabulary, an adapter), else the failure of its last load by llama.cpp."""

from __future__ import annotations

from pathlib import Path

from app.paths import models_dir
from models.discovery import discover_models, scan_summary
from models.probe import _save_check, file_identity
from tests.helpers.model_files import write_tiny_gguf
from ui.dialogs.model_library import Status, entry_status


def test_a_vocabulary_only_file_and_a_file_that_failed_to_load_say_why(tmp_path: Path) -> None:
    write_tiny_gguf(models_dir() / "good.gguf")
    write_tiny_gguf(models_dir() / "ggml-vocab.gguf", weights=False)
    failed = write_tiny_gguf(models_dir() / "failed.gguf", tensor_elements=128)
    _save_check(file_identity(failed), False, "check_tensor_dims: tensor 'output.weight' not found")
    found = discover_models(hf_cache=tmp_path / "no-cache", lmstudio=[])
    entries = {entry.path.name: entry for entry in found}
    assert entry_status(entries["good.gguf"])[1] is None
    assert entry_status(entries["ggml-vocab.gguf"]) == (
        "no weights (a vocabulary-only file)",
        Status.WARNING,
    )
    text, status = entry_status(entries["failed.gguf"])
    assert status is Status.WARNING
    assert (
        text == "llama.cpp could not load it: check_tensor_dims: tensor 'output.weight' not found"
    )
    assert not entries["failed.gguf"].is_model
    assert scan_summary(found) == "3 files, 2 unusable"

"""make-draft's default file name: two targets named alike in two folders never share one."""

from __future__ import annotations

import shutil
from pathlib import Path

from models.cli import default_draft_path
from tests.helpers.model_files import write_tiny_gguf


def test_a_name_held_by_another_models_draft_gets_a_tag_and_its_own_keeps_it(
    tmp_path: Path,
) -> None:
    first = write_tiny_gguf(tmp_path / "a" / "model.gguf", vocab_model="gpt2")
    second = write_tiny_gguf(tmp_path / "b" / "model.gguf", vocab_model="llama")
    drafts = tmp_path / "drafts"
    drafts.mkdir()
    plain = drafts / "model.Q4_0.gguf"
    assert default_draft_path(first, "q4_0", drafts) == plain  # nothing there yet
    shutil.copy(first, plain)  # the first target's draft, made earlier
    # The first target finds its own draft under the plain name (and is told it exists).
    assert default_draft_path(first, "Q4_0", drafts) == plain
    # The second, another vocabulary, gets a name of its own instead of the first's file.
    other = default_draft_path(second, "Q4_0", drafts)
    assert other != plain and other.parent == drafts
    assert other.name.startswith("model-") and other.name.endswith(".Q4_0.gguf")
    assert default_draft_path(second, "Q4_0", drafts) == other  # the same name every time

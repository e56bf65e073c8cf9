"""A refused draft's reason says which side holds which value: the CLI's sentence names the
draft first ("draft D is not compatible with target T: ..."), so an unlabelled "(gpt2 vs llama)"
read the target's value as the draft's."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import DraftIncompatibleError
from models.compat import check_draft_file
from tests.helpers.model_files import write_tiny_gguf


def test_a_vocabulary_type_mismatch_names_each_side(tmp_path: Path) -> None:
    target = write_tiny_gguf(tmp_path / "target.gguf", vocab_model="gpt2")
    draft = write_tiny_gguf(tmp_path / "draft.gguf", vocab_model="llama")
    with pytest.raises(DraftIncompatibleError) as caught:
        check_draft_file(draft, target)
    assert str(caught.value) == (
        "draft draft.gguf is not compatible with target target.gguf: "
        "vocabulary type differs (target gpt2, draft llama)"
    )


def test_a_differing_token_names_each_side(tmp_path: Path) -> None:
    tokens = [f"t{i}" for i in range(64)]
    target = write_tiny_gguf(tmp_path / "target.gguf", tokens=tokens)
    renamed = [*tokens[:40], "renamed", *tokens[41:]]
    draft = write_tiny_gguf(tmp_path / "draft.gguf", tokens=renamed)
    with pytest.raises(DraftIncompatibleError, match=r"token 40 differs: target 't40', draft 're"):
        check_draft_file(draft, target)

"""A context smaller than the batch size: llama.cpp caps its batch at the n_ctx asked for while
rounding n_ctx itself up, so the handle must chunk by the batch llama.cpp set, not the one it
asked for (a larger decode aborts the whole process), and a context too small for one
verification pass is refused up front."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.config import MAX_GAMMA, check_model_config
from app.errors import InvalidSettingError
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel


def test_a_prompt_longer_than_the_context_asked_for_decodes(demo_models: Any) -> None:
    with LlamaModel(ModelConfig(str(demo_models.q8_0), n_ctx=64, n_threads=1)) as model:
        assert model.n_ctx >= 64
        history = [(3 * i + 1) % 7 for i in range(min(model.n_ctx, 200))]
        rows = model.feed(history, 2)
        assert rows.shape == (2, model.n_vocab)
        assert model.n_batch <= 64 < len(history)


def test_a_context_too_small_for_a_verification_pass_is_refused() -> None:
    with pytest.raises(InvalidSettingError, match=rf"must be in {MAX_GAMMA + 1}\.\."):
        check_model_config(ModelConfig("model.gguf", n_ctx=MAX_GAMMA))
    check_model_config(ModelConfig("model.gguf", n_ctx=MAX_GAMMA + 1))


def test_more_rows_than_one_batch_holds_is_an_error_not_a_hang(demo_models: Any) -> None:
    with LlamaModel(ModelConfig(str(demo_models.q8_0), n_ctx=MAX_GAMMA + 1, n_threads=1)) as m:
        history = [(3 * i + 1) % 7 for i in range(m.n_batch + 5)]
        with pytest.raises(ValueError, match="more rows than one batch holds"):
            m.feed(history, m.n_batch + 1)
        assert m.feed(history, m.n_batch).shape == (m.n_batch, m.n_vocab)

"""A context smaller than the batch size: llama.cpp caps its batch at the n_ctx asked for while
rounding n_ctx itself up, so the handle must chunk by the batch llama.cpp set, not the one it
asked for (a larger decode aborts the whole process)."""

from __future__ import annotations

from typing import Any

from app.engine.config import ModelConfig
from app.llama.model import LlamaModel


def test_a_prompt_longer_than_the_context_asked_for_decodes(demo_models: Any) -> None:
    with LlamaModel(ModelConfig(str(demo_models.q8_0), n_ctx=64, n_threads=1)) as model:
        assert model.n_ctx >= 64
        history = [(3 * i + 1) % 7 for i in range(min(model.n_ctx, 200))]
        rows = model.feed(history, 2)
        assert rows.shape == (2, model.n_vocab)
        assert model.n_batch <= 64 < len(history)

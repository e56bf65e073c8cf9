"""A prompt read in parts (app/engine/prompt_pass.py) on real llama.cpp: the same batches and,
to the bit, the same logits as one feed of the whole prompt, cached or restored prefix or not.

The demo Q4_0 model, one thread (deterministic), a small batch so that a prompt has many parts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.engine.control import GenerationControl
from app.engine.prompt_pass import read_prompt
from app.llama.batches import PROMPT_ROWS
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from app.metrics.cost_model import MAX_GAMMA

_BATCH = MAX_GAMMA + 1  # the smallest batch a model accepts


class _LoggedDecode:
    """llama_cpp with the size of each llama_decode call's batch logged."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self.sizes: list[int] = []

    def llama_decode(self, ctx: Any, batch: Any) -> int:
        self.sizes.append(int(batch.n_tokens))
        return int(self._lib.llama_decode(ctx, batch))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)


def _open(demo_models: Any, uniform: bool) -> LlamaModel:
    model = LlamaModel(ModelConfig(str(demo_models.q4_0), n_ctx=1024, n_batch=_BATCH, n_threads=1))
    model.uniform_batches = uniform
    return model


@pytest.mark.parametrize("uniform", [False, True])
def test_a_prompt_read_in_parts_gives_the_logits_one_feed_gives(
    demo_models: Any, monkeypatch: pytest.MonkeyPatch, uniform: bool
) -> None:
    before = [1, *range(1000, 1100)]  # an earlier conversation, saved
    prompt = [1, *range(2000, 2300)]
    extended = [*before, *range(3000, 3200)]  # a turn added to the saved conversation
    with _open(demo_models, uniform) as alone, _open(demo_models, uniform) as parts:
        for model in (alone, parts):
            model.feed(before[:-1], 1)
            model.feed(before, 1)  # settles the tokens before the last, as a reply does
            model.feed([*prompt[:50], 7], 1)  # another conversation: `before` is saved
        for history in (prompt, extended):
            logged = []
            for model in (alone, parts):
                decode = _LoggedDecode(model._lib)
                monkeypatch.setattr(model, "_lib", decode)
                logged.append(decode)
            one = alone.feed(history, PROMPT_ROWS)[-1:]
            rows = read_prompt(parts, history, GenerationControl())
            assert rows is not None
            assert logged[1].sizes == logged[0].sizes
            np.testing.assert_array_equal(rows, one)
            assert parts.reused == alone.reused
            # The added turn starts where the saved conversation ends: it was restored.
            assert alone.reused == (len(before) if history is extended else 50)
            monkeypatch.undo()

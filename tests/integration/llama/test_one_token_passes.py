"""A draft model that reads and drafts in one-token passes (on a CPU with AMX, with llama.cpp's
extra buffers) drafts what the same model in batches drafts, and a runtime loads every draft
model so."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from app.engine.runtime import DRAFT, Runtime
from app.llama import weights
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel

pytestmark = pytest.mark.model


def _greedy(model: LlamaModel, history: list[int], n: int) -> list[int]:
    sequence = list(history)
    for _ in range(n):
        sequence.append(int(np.argmax(model.feed(sequence, 1)[0])))
    return sequence[len(history) :]


def test_one_token_passes_draft_what_batches_draft(
    demo_models: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ModelConfig(str(demo_models.q4_1), n_ctx=512, n_gpu_layers=0, n_threads=2)
    with LlamaModel(config) as batched:
        prompt = batched.tokenize("The three primary colours are")
        expected = _greedy(batched, prompt, 24)
    # Wherever this runs, take the one-token path an AMX CPU takes (elsewhere the extra
    # buffers are llama.cpp's default anyway).
    monkeypatch.setattr(weights, "one_token_buffers", lambda *_args: True)
    with LlamaModel(replace(config, one_token_passes=True)) as single:
        assert single.one_token_passes and single.n_batch == 1
        assert _greedy(single, prompt, 24) == expected
        single.feed([*prompt, *expected], 0)  # a gap read one token a pass
        assert single.tokens == [*prompt, *expected]


def test_a_runtime_loads_draft_models_for_one_token_passes(demo_models: Any) -> None:
    runtime = Runtime()
    try:
        runtime.load_target(ModelConfig(str(demo_models.f32), n_ctx=512, n_threads=2))
        runtime.load_draft(ModelConfig(str(demo_models.q4_1), n_ctx=512, n_threads=2))
        loaded = runtime.draft_config(DRAFT)
        assert loaded is not None and loaded.one_token_passes
        assert runtime.target is not None and not runtime.target.config.one_token_passes
    finally:
        runtime.unload()


def test_weights_llama_cpp_repacks_are_loaded_on_a_thread_that_has_ended(
    demo_models: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its OpenMP team would otherwise slow every pass made on the engine's own thread."""
    import llama_cpp

    loaders: list[threading.Thread] = []
    real = llama_cpp.llama_model_load_from_file

    def load(*args: Any) -> Any:
        loaders.append(threading.current_thread())
        return real(*args)

    monkeypatch.setattr(llama_cpp, "llama_model_load_from_file", load)
    monkeypatch.setattr(weights, "one_token_buffers", lambda *_args: True)
    config = ModelConfig(str(demo_models.q4_1), n_ctx=512, n_threads=2, one_token_passes=True)
    with LlamaModel(config) as model:
        assert model.one_token_passes
        assert len(loaders) == 1 and loaders[0] is not threading.current_thread()
        assert not loaders[0].is_alive()

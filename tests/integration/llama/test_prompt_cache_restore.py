"""A conversation's prompt sent again after another is restored from host memory, not re-read.

Real llama.cpp on the demo Q4_0 model, one thread (deterministic): the rows decoded are counted
through a wrapper around llama_decode, and the restored cache must give the very logits the live
cache gave before the switch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from app.errors import InvalidSettingError
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from app.llama.prompt_cache import MIN_SAVED_TOKENS


class _CountingDecode:
    """llama_cpp with the rows each llama_decode call carried counted."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self.rows = 0

    def llama_decode(self, ctx: Any, batch: Any) -> int:
        self.rows += int(batch.n_tokens)
        return int(self._lib.llama_decode(ctx, batch))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)


def _open(demo_models: Any, **settings: Any) -> LlamaModel:
    return LlamaModel(ModelConfig(str(demo_models.q4_0), n_ctx=1024, n_threads=1, **settings))


@pytest.fixture(scope="module")
def model(demo_models: Any) -> Iterator[LlamaModel]:
    with _open(demo_models) as m:
        yield m


def _conversation(model: LlamaModel, first: int, n: int) -> list[int]:
    return [model.bos_id, *range(first, first + n - 1)]


def _reply(model: LlamaModel, history: list[int], steps: int) -> tuple[list[int], np.ndarray]:
    """Plain greedy steps, as a reply decodes: each call settles the tokens before it."""
    logits = model.feed(history, 1)
    for _ in range(steps):
        history = [*history, int(np.argmax(logits[-1]))]
        logits = model.feed(history, 1)
    return history, logits


def _two_conversations(model: LlamaModel) -> tuple[list[int], list[int]]:
    """From an empty cache, a conversation and then another: the first is saved on leaving."""
    model.reset()
    first, _ = _reply(model, _conversation(model, 1000, 100), steps=3)
    second, _ = _reply(model, _conversation(model, 3000, 100), steps=3)
    return first, second


def _counting(model: LlamaModel, monkeypatch: pytest.MonkeyPatch) -> _CountingDecode:
    counter = _CountingDecode(model._lib)
    monkeypatch.setattr(model, "_lib", counter)
    return counter


def test_a_conversation_sent_again_is_restored_with_the_logits_it_had(
    model: LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    model.reset()
    first, before = _reply(model, _conversation(model, 1000, 120), steps=4)
    _reply(model, _conversation(model, 3000, 90), steps=4)
    assert len(model.prompt_cache) == 1
    counter = _counting(model, monkeypatch)
    again = model.feed(first, 1)
    assert counter.rows == 1  # only the row whose logits were asked for
    assert model.tokens == first
    assert int(model._lib.llama_memory_seq_pos_max(model._memory, 0)) + 1 == len(first)
    np.testing.assert_array_equal(again, before)


def test_the_conversation_left_for_a_restored_one_is_kept_too(
    model: LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _two_conversations(model)
    model.feed([*first, 5], 1)
    counter = _counting(model, monkeypatch)
    model.feed([*second, 7], 1)
    assert counter.rows == 1
    assert len(model.prompt_cache) == 2


def test_a_new_turn_extending_a_saved_conversation_reads_only_the_turn(
    model: LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = _two_conversations(model)
    counter = _counting(model, monkeypatch)
    model.feed([*first, *range(5000, 5020)], 1)
    assert counter.rows == 20


def test_a_speculative_rollback_saves_nothing(model: LlamaModel) -> None:
    model.reset()
    history, _ = _reply(model, _conversation(model, 1000, 100), steps=2)
    drafted = [*history, *range(6000, 6000 + MIN_SAVED_TOKENS + 10)]
    model.feed(drafted, MIN_SAVED_TOKENS + 11)  # a long draft verified in one pass ...
    model.feed([*history, 6000, 42], 2)  # ... of which one token was kept
    assert len(model.prompt_cache) == 0


def test_reset_forgets_saved_states(model: LlamaModel) -> None:
    _two_conversations(model)
    assert model.prompt_cache.bytes_used > 0
    model.reset()
    assert (len(model.prompt_cache), model.prompt_cache.bytes_used) == (0, 0)


def test_saved_states_stay_within_the_budget(demo_models: Any) -> None:
    # Each 42-token state takes about 0.95 MiB of the demo model's cache: two fit in 2 MiB.
    with _open(demo_models, prompt_cache_mib=2) as small:
        for start in range(1000, 9000, 1000):
            _reply(small, _conversation(small, start, 40), steps=2)
        assert len(small.prompt_cache) == 2
        assert small.prompt_cache.bytes_used <= 2 * 2**20


def test_a_model_without_a_prompt_cache_re_reads_the_prompt(
    demo_models: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open(demo_models, prompt_cache_mib=0) as plain:
        first, _ = _two_conversations(plain)
        counter = _counting(plain, monkeypatch)
        plain.feed(first, 1)
        assert counter.rows == len(first) - 1  # all but the shared first token
        assert len(plain.prompt_cache) == 0


def test_a_negative_prompt_cache_size_is_refused() -> None:
    with pytest.raises(InvalidSettingError, match="prompt cache"):
        ModelConfig("x.gguf", prompt_cache_mib=-1).validate()

"""`LlamaModel.feed` when llama.cpp refuses a batch: the cache and `tokens` stay in step.

The failure is provoked by a decode that fails on a chosen call (llama.cpp's own rc = 1, "no
KV slot", is hard to reach with a history that fits n_ctx), on the real demo draft model with
a small batch so that one feed decodes in several chunks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from app.errors import ContextOverflowError, KvCacheFullError
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from app.metrics.cost_model import MAX_GAMMA

_BATCH = MAX_GAMMA + 1  # the smallest batch a model accepts


class _FailingDecode:
    """llama_cpp with llama_decode answering `rc` on its `fail_on`-th call (1-based)."""

    def __init__(self, lib: Any, fail_on: int, rc: int) -> None:
        self._lib = lib
        self._fail_on = fail_on
        self._rc = rc
        self.calls = 0

    def llama_decode(self, ctx: Any, batch: Any) -> int:
        self.calls += 1
        if self.calls == self._fail_on:
            if self._rc != 1:
                # A real failure after part of the batch reached the cache: decode it first.
                self._lib.llama_decode(ctx, batch)
            return self._rc
        return int(self._lib.llama_decode(ctx, batch))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)


@pytest.fixture(scope="module")
def model(demo_models: Any) -> Iterator[LlamaModel]:
    with LlamaModel(
        ModelConfig(str(demo_models.q4_0), n_ctx=512, n_batch=_BATCH, n_threads=1)
    ) as m:
        yield m


def _cached_until(model: LlamaModel) -> int:
    """One past the highest position the KV cache holds (0 when empty)."""
    lib = model._lib
    return int(lib.llama_memory_seq_pos_max(model._memory, 0)) + 1


def _history(model: LlamaModel, n: int) -> list[int]:
    return [model.bos_id, *range(1000, 1000 + n - 1)]


@pytest.mark.parametrize("rc", [1, -3])
def test_a_later_chunk_failing_leaves_the_cache_holding_exactly_tokens(
    model: LlamaModel, rc: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = _history(model, 3 * _BATCH + 5)
    model.reset()
    model.feed(history[:10], 0)
    failing = _FailingDecode(model._lib, fail_on=3, rc=rc)
    monkeypatch.setattr(model, "_lib", failing)
    with pytest.raises((KvCacheFullError, RuntimeError)):
        model.feed(history, 1)
    assert failing.calls == 3  # two chunks had reached the cache before the failure
    monkeypatch.undo()
    assert model.tokens == history[:10]
    assert _cached_until(model) == 10


def test_after_a_failed_feed_the_next_one_computes_what_a_fresh_cache_does(
    model: LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = _history(model, 2 * _BATCH + 7)
    model.reset()
    expected = model.feed(history, 2)
    model.reset()
    model.feed(history[:4], 0)
    monkeypatch.setattr(model, "_lib", _FailingDecode(model._lib, fail_on=2, rc=1))
    with pytest.raises(KvCacheFullError):
        model.feed(history, 2)
    monkeypatch.undo()
    again = model.feed(history, 2)
    assert model.tokens == history
    assert np.array_equal(again, expected)


def test_a_full_kv_cache_is_not_reported_as_a_long_prompt(
    model: LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    model.reset()
    monkeypatch.setattr(model, "_lib", _FailingDecode(model._lib, fail_on=1, rc=1))
    with pytest.raises(KvCacheFullError, match="KV cache has no room") as caught:
        model.feed(_history(model, 20), 1)
    assert not isinstance(caught.value, ContextOverflowError)
    assert caught.value.n_ctx == model.n_ctx

"""The fake model keeps `LlamaModel.feed`'s contract: the same checks pass on both handles.

The exactness harness (test_exactness_harness.py) is only as good as the fake is faithful to
what the engine relies on: the shape and order of the rows `feed` returns, the cache mirroring
the history through extensions and rollbacks, and the errors for impossible requests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from app.errors import ContextOverflowError
from app.llama.config import ModelConfig
from app.llama.handle import ModelHandle
from app.llama.model import LlamaModel
from tests.helpers.fake_llama import FakeLlama, toy_logits

N_CTX = 64


@pytest.fixture(params=["fake", pytest.param("llama", marks=pytest.mark.model)])
def handle(request: pytest.FixtureRequest) -> Iterator[ModelHandle]:
    model: ModelHandle
    if request.param == "fake":
        model = FakeLlama(toy_logits(3, 8), 8, eog=[7], n_ctx=N_CTX)
    else:
        demo: Any = request.getfixturevalue("demo_models")
        model = LlamaModel(ModelConfig(str(demo.q8_0), n_ctx=N_CTX, n_threads=1))
    try:
        yield model
    finally:
        model.close()


def _history(n: int) -> list[int]:
    return [(3 * i + 1) % 7 for i in range(n)]  # ids 0..6 exist in both vocabularies


def test_feed_returns_the_last_rows_asked_for(handle: ModelHandle) -> None:
    history = _history(10)
    rows = handle.feed(history, 3)
    assert rows.shape == (3, handle.n_vocab) and rows.dtype == np.float32
    # Row j predicts the token after history[len - 3 + j]: the same row one position at a time,
    # up to the rounding of a one-row pass on the real model: on a Q8_0 model llama.cpp's CPU
    # kernels for one row and for a batch differ by up to 0.7 in logits of about 20 on an AVX2
    # EPYC (0.1 elsewhere), never in the row's best token.
    for j in range(3):
        alone = handle.feed(history[: len(history) - 3 + j + 1], 1)[0]
        np.testing.assert_allclose(rows[j], alone, atol=1.0)
        assert int(np.argmax(rows[j])) == int(np.argmax(alone))
    assert handle.feed(history, 0).shape == (0, handle.n_vocab)


def test_a_shorter_or_different_history_rolls_the_cache_back(handle: ModelHandle) -> None:
    history = _history(12)
    first = handle.feed(history, 1)[0]
    handle.feed([*history[:6], 5, 4, 3], 1)  # rollback, then a different continuation
    again = handle.feed(history, 1)[0]
    np.testing.assert_allclose(again, first, atol=0.1)
    assert handle.feed(history[:4], 2).shape == (2, handle.n_vocab)


def test_impossible_requests_raise_as_the_real_handle_does(handle: ModelHandle) -> None:
    with pytest.raises(ValueError, match="more rows than the history"):
        handle.feed(_history(3), 4)
    with pytest.raises(ContextOverflowError):
        handle.feed(_history(handle.n_ctx + 1), 1)


def test_text_comes_from_the_token_pieces(handle: ModelHandle) -> None:
    tokens = _history(5)
    expected = b"".join(handle.token_bytes(t) for t in tokens).decode("utf-8", "replace")
    assert handle.detokenize(tokens) == expected
    assert handle.path.name.endswith(".gguf")

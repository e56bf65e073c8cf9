"""A deterministic, numpy-cheap stand-in for `LlamaModel`, for checking the engine's exactness.

Logits are a fixed function of the history (`LogitFn`), so every probability the engine can
produce is computable by enumeration. `toy_logits` draws a small logit vector from a generator
seeded by the last few token ids; `blend` mixes two such functions, which gives a draft that
agrees with the target often but not always (p ≠ q).

`FakeLlama.feed` keeps the real handle's contract: the cache mirrors `tokens`, the longest common
prefix is kept, and row j of the result predicts the token after
history[len(history) - n_logits + j]. Because a row depends only on the history before it, a
rollback or a stale cache cannot change a logit here; what the harness checks is the engine's
arithmetic over those rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.errors import ContextOverflowError
from app.llama.handle import common_prefix

Logits = npt.NDArray[np.float32]
LogitFn = Callable[[Sequence[int]], Logits]


def toy_logits(
    seed: int, n_vocab: int, *, order: int = 2, scale: float = 1.5, bias: Sequence[float] = ()
) -> LogitFn:
    """Logits that depend only on the last `order` tokens: N(0, scale²) per id, plus `bias`."""
    shift = np.zeros(n_vocab, dtype=np.float64)
    shift[: len(bias)] = bias
    cache: dict[tuple[int, ...], Logits] = {}

    def logits(history: Sequence[int]) -> Logits:
        key = tuple(history[-order:]) if order else ()
        row = cache.get(key)
        if row is None:
            # +1 keeps the seed words non-negative; the length tells a short history apart.
            words = [seed, len(key), *(t + 1 for t in key)]
            draw = np.random.default_rng(words).normal(0.0, scale, n_vocab)
            row = (draw + shift).astype(np.float32)
            cache[key] = row
        return row

    return logits


def blend(base: LogitFn, noise: LogitFn, weight: float) -> LogitFn:
    """base + weight * noise: a draft close to the target when weight is small."""
    w = np.float32(weight)

    def logits(history: Sequence[int]) -> Logits:
        return base(history) + w * noise(history)

    return logits


class FakeLlama:
    """Satisfies `app.llama.handle.ModelHandle`; token t reads as "<t>"."""

    def __init__(
        self,
        logits: LogitFn,
        n_vocab: int,
        *,
        eog: Iterable[int] = (),
        n_ctx: int = 512,
        name: str = "fake.gguf",
    ) -> None:
        self.logits = logits
        self.n_vocab = n_vocab
        self.n_ctx = n_ctx
        self.path = Path(name)
        self.uniform_batches = False
        self.tokens: list[int] = []
        self.reused = 0  # as LlamaModel.reused: the history the last feed found cached
        self.closed = False
        self.decoded = 0  # tokens run through the "model", as a cost counter for tests
        self.passes = 0  # calls that ran the "model" on at least one token
        self._eog = frozenset(eog)

    @property
    def eos_id(self) -> int:
        return min(self._eog) if self._eog else -1

    @property
    def bos_id(self) -> int:
        return -1  # the toy vocabulary has no BOS; prompts are given as ids

    def feed(self, history: Sequence[int], n_logits: int) -> Logits:
        if self.closed:
            raise RuntimeError("feed on a closed model")
        n_hist = len(history)
        if n_hist > self.n_ctx:
            raise ContextOverflowError(n_hist, self.n_ctx)
        if n_logits > n_hist:
            raise ValueError("cannot return logits for more rows than the history has")
        keep = 0
        limit = min(len(self.tokens), n_hist - n_logits)
        while keep < limit and self.tokens[keep] == history[keep]:
            keep += 1
        self.reused = common_prefix(self.tokens, history)
        self.decoded += n_hist - keep
        if n_hist > keep:
            self.passes += 1
        self.tokens = list(history)
        rows = np.empty((n_logits, self.n_vocab), dtype=np.float32)
        for j in range(n_logits):
            rows[j] = self.logits(history[: n_hist - n_logits + j + 1])
        return rows

    def held_for(self, history: Sequence[int]) -> int:
        return common_prefix(self.tokens, history)  # a fake restores nothing

    def reset(self) -> None:
        self.tokens = []

    def is_eog(self, token: int) -> bool:
        return token in self._eog

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:
        if token in self._eog and not special:
            return b""
        return f"<{token}>".encode()

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str:
        return b"".join(self.token_bytes(t, special=special) for t in tokens).decode()

    def close(self) -> None:
        self.closed = True
        self.tokens = []

"""The types a grammar constraint is used through, apart from llama.cpp's implementation
(app.engine.constraint), so that GenerationConfig can carry one without importing it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.llama.handle import ModelHandle

Logits = npt.NDArray[np.float32]


class TokenConstraint(Protocol):
    """One parse state of a grammar over token ids."""

    def mask(self, logits: Logits) -> Logits:
        """A copy of logits with every token the grammar forbids here set to -inf."""
        ...

    def allowed(self, tokens: Sequence[int]) -> list[bool]:
        """Whether the grammar allows each of these tokens here."""
        ...

    def accept(self, token: int) -> None:
        """Advance past an allowed token (never an end-of-generation one)."""
        ...

    def fork(self) -> TokenConstraint:
        """An independent copy of this state."""
        ...

    def close(self) -> None: ...


class ConstraintSpec(Protocol):
    """What a GenerationConfig carries: plain data that becomes a TokenConstraint per reply.

    `draft` says whether a draft model's logits are masked too; off only to measure what the
    mask on the draft is worth (acceptance falls, the reply's distribution does not change)."""

    @property
    def draft(self) -> bool: ...

    def start(self, target: ModelHandle) -> TokenConstraint: ...

"""What the engine and its drafters need from a loaded model, as a structural type.

`LlamaModel` satisfies it; so can a deterministic stand-in, which lets the speculative loop be
checked against exact enumeration without native code. Keep it to what the engine reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt


class ModelHandle(Protocol):
    path: Path
    n_vocab: int
    n_ctx: int
    # When set, every pass computes at least two rows (see LlamaModel.uniform_batches).
    uniform_batches: bool
    tokens: list[int]  # what the cache holds, in order

    def feed(self, history: Sequence[int], n_logits: int) -> npt.NDArray[np.float32]:
        """Make the cache hold exactly `history`; return logits of its last n_logits rows."""
        ...

    def reset(self) -> None: ...

    def is_eog(self, token: int) -> bool: ...

    def token_bytes(self, token: int, *, special: bool = False) -> bytes: ...

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str: ...

    def close(self) -> None: ...

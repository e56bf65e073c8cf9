"""Grammar constraints: which tokens a reply may continue with, as a mask on the logits.

A constraint is part of the sampling transform. The target's logits are masked at every
verified position and the draft model's logits the same way while it drafts, before the rest
of the transform (app.engine.sampling), so p and q both come from one deterministic function of
their own logits and history and the exact acceptance rule keeps the reply distributed as the
target's constrained distribution; greedy output is the plain constrained greedy reply. Drafts
that are not masked (the suffix index, prompt lookup) need nothing: a token the grammar forbids
has p = 0 and is rejected.

The grammar itself is llama.cpp's (`llama_sampler_init_grammar`, GBNF): `llama_sampler_apply`
sets forbidden logits to -inf, `llama_sampler_accept` advances the parse, `llama_sampler_clone`
forks it for a draft, which then advances its own copy.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from app.engine.config import SamplingConfig
from app.engine.constraint_types import ConstraintSpec, Logits, TokenConstraint
from app.engine.sampling import penalized_logits
from app.errors import InvalidSettingError
from app.llama.grammar_parse import grammar_sampler
from app.llama.handle import ModelHandle

# Greedy decoding first asks the grammar about this many of the best tokens, in one call; only
# when it forbids them all is the whole vocabulary masked (llama.cpp's common sampler likewise
# tries the unconstrained choice before the full grammar pass).
_GREEDY_SHORTLIST = 16


@dataclass(frozen=True, slots=True)
class Grammar:
    """A GBNF grammar (llama.cpp's grammar format) the reply must match from its first token."""

    gbnf: str
    root: str = "root"
    draft: bool = True

    def start(self, target: ModelHandle) -> TokenConstraint:
        vocab = getattr(target, "vocab", None)
        if vocab is None:
            raise InvalidSettingError("a grammar needs a llama.cpp model to read its vocabulary")
        import llama_cpp  # noqa: PLC0415 - native library, loaded with the model

        sampler = grammar_sampler(llama_cpp, vocab, self.gbnf, self.root)
        n_vocab = int(llama_cpp.llama_vocab_n_tokens(vocab))
        return LlamaGrammarState(llama_cpp, sampler, n_vocab)


_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class LlamaGrammarState:
    """A llama.cpp grammar sampler; numpy's struct array is handed to it without copying."""

    def __init__(self, lib: Any, sampler: Any, n_vocab: int) -> None:
        self._lib = lib
        self._sampler = sampler
        self._n_vocab = n_vocab
        self._free = weakref.finalize(self, lib.llama_sampler_free, sampler)

    def _apply(self, ids: npt.NDArray[np.int64], logits: npt.NDArray[np.float32]) -> Logits:
        data = np.empty(ids.shape[0], dtype=_TOKEN_DATA)
        data["id"] = ids
        data["logit"] = logits
        data["p"] = 0.0
        lib = self._lib
        array = lib.llama_token_data_array(
            data=data.ctypes.data_as(ctypes.POINTER(lib.llama_token_data)),
            size=ids.shape[0],
            selected=-1,
            sorted=False,
        )
        lib.llama_sampler_apply(self._sampler, ctypes.byref(array))
        out: Logits = data["logit"].copy()
        return out

    def mask(self, logits: Logits) -> Logits:
        n = min(logits.shape[0], self._n_vocab)
        masked = np.full(logits.shape[0], -np.inf, dtype=np.float32)
        masked[:n] = self._apply(np.arange(n), logits[:n])
        return masked

    def allowed(self, tokens: Sequence[int]) -> list[bool]:
        ids = np.asarray(tokens, dtype=np.int64)
        inside = ids < self._n_vocab
        result = np.zeros(ids.shape[0], dtype=bool)
        if inside.any():
            probe = np.zeros(int(inside.sum()), dtype=np.float32)
            result[inside] = np.isfinite(self._apply(ids[inside], probe))
        return [bool(x) for x in result]

    def accept(self, token: int) -> None:
        # llama.cpp aborts the process on a token its grammar cannot take; refuse it here.
        if not self.allowed([token])[0]:
            raise InvalidSettingError(f"token {token} does not fit the grammar here")
        self._lib.llama_sampler_accept(self._sampler, token)

    def fork(self) -> LlamaGrammarState:
        return LlamaGrammarState(
            self._lib, self._lib.llama_sampler_clone(self._sampler), self._n_vocab
        )

    def close(self) -> None:
        self._free()


class ConstraintCursor:
    """The reply's constraint state, following the history it is asked about.

    Verification only ever extends the history, so the state moves forward along it and is
    never undone; a draft model reads it through `follow`, which forks it and walks the fork
    along the draft's own tokens."""

    def __init__(self, state: TokenConstraint, at: int, target: ModelHandle) -> None:
        self.state = state
        self.at = at  # the history length `state` stands for
        self._target = target

    def ends(self, token: int) -> bool:
        return self._target.is_eog(token)

    def _catch_up(self, history: Sequence[int]) -> None:
        for token in history[self.at :]:
            if not self._target.is_eog(token):
                self.state.accept(token)
            self.at += 1

    def mask(self, logits: Logits, history: Sequence[int]) -> Logits:
        self._catch_up(history)
        return self.state.mask(logits)

    def follow(self, history: Sequence[int]) -> TokenConstraint | None:
        """A fork of the state after `history`, or None when the grammar forbids a token of it
        (nothing drafted after such a token can be kept)."""
        fork = self.state.fork()
        for token in history[self.at :]:
            if self._target.is_eog(token) or not fork.allowed([token])[0]:
                fork.close()
                return None
            fork.accept(token)
        return fork

    def greedy(self, logits: Logits, history: Sequence[int], sampling: SamplingConfig) -> int:
        self._catch_up(history)
        return int(np.argmax(greedy_logits(self.state, logits, history, sampling)))

    def close(self) -> None:
        self.state.close()


def greedy_logits(
    state: TokenConstraint, logits: Logits, history: Sequence[int], sampling: SamplingConfig
) -> Logits:
    """Penalised logits whose argmax is the argmax among the tokens the grammar allows.

    Only the best few tokens are put to the grammar; the forbidden ones among them get -inf
    and the rest of the row is left as it is, so a softmax over it counts tokens the grammar
    may forbid (a draft's confidence errs towards doubt). When the shortlist cannot settle
    the argmax, the whole row is masked."""
    z = penalized_logits(logits, history, sampling)
    k = min(_GREEDY_SHORTLIST, z.shape[0])
    short = np.argpartition(-z, k - 1)[:k]
    # The k best with ties by id, the order np.argmax breaks them in: the first allowed one is
    # the masked argmax when nothing outside the shortlist can tie with it.
    order = short[np.lexsort((short, -z[short]))]
    allowed = np.array(state.allowed([int(t) for t in order]), dtype=bool)
    first = int(np.argmax(allowed))
    if allowed[first] and (k == z.shape[0] or z[order[first]] > z[order[-1]]):
        out = z.copy()
        out[order[~allowed]] = -np.inf
        return out
    return state.mask(z)


def start_constraint(
    spec: ConstraintSpec | None, target: ModelHandle, prompt_length: int
) -> ConstraintCursor | None:
    if spec is None:
        return None
    return ConstraintCursor(spec.start(target), prompt_length, target)

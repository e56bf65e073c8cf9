"""A deterministic stand-in for LlamaModel, so the window's state machine runs in seconds.

It keeps `LlamaModel`'s contract (feed returns the logits of the last n_logits rows of exactly
`history`; tokenize, token texts, the chat template, facts, close), with a small word
vocabulary and a next-token rule that is a pure function of the previous token and its
position. The real Runtime, engine, drafters, sampling and acceptance run on top of it, so
replies have real rounds and stats. A draft made with `disagree_every=k` proposes a wrong token
at every k-th position, so acceptance is known in advance.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.engine.config import ModelConfig
from app.errors import Cancelled, ContextOverflowError, ModelLoadError
from app.llama.model import LoadProgress, ModelFacts

SPECIALS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
EOS = 2
WORDS = [
    "the",
    "a",
    "speculative",
    "draft",
    "target",
    "model",
    "token",
    "reply",
    "chat",
    "window",
    "fast",
    "plain",
    "round",
    "accepted",
    "verify",
    "guess",
    "next",
    "word",
    "local",
    "home",
    "offline",
    "quick",
    "answer",
    "measure",
    "memory",
    "speed",
    "user",
    "prompt",
    "code",
    "block",
    "list",
    "line",
    "more",
    "less",
    "good",
    "bad",
    "yes",
    "no",
    "and",
    "or",
    "but",
    "so",
    "then",
    "here",
    "there",
    "now",
]
VOCAB = [*SPECIALS, "\n", *(" " + w for w in WORDS)]
FIRST_WORD = len(SPECIALS) + 1
N_WORDS = len(WORDS)
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_PIECE = re.compile(r"<\|im_start\|>|<\|im_end\|>|\n|\s*[^\s<]+|\s*<")


def next_word(previous: int, position: int) -> int:
    """The target's greedy choice after `previous` at `position`: a fixed, varied sequence."""
    return FIRST_WORD + (previous * 31 + position * 7) % N_WORDS


class FakeModel:
    """Duck-types LlamaModel for the engine. `step_s` is slept per pass, so a reply lasts long
    enough for a test to stop or toggle it mid-way; a path containing "broken" fails to load."""

    def __init__(
        self,
        config: ModelConfig,
        *,
        progress: LoadProgress | None = None,
        step_s: float = 0.002,
        disagree_every: int = 0,
    ) -> None:
        config.validate()
        if "broken" in Path(config.path).name:
            raise ModelLoadError(config.path, "the fake refuses files named broken")
        for fraction in (0.5, 1.0):
            if progress is not None and not progress(fraction):
                raise Cancelled("model loading cancelled")
        self.config = config
        self.path = Path(config.path)
        self.tokens: list[int] = []
        self.uniform_batches = False
        self.n_vocab = len(VOCAB)
        self.n_ctx = config.n_ctx
        self.n_batch = config.n_batch
        self.step_s = step_s
        self.disagree_every = disagree_every
        self.passes: list[int] = []  # rows decoded per pass, for tests that count work
        self._closed = False

    @staticmethod
    def factory(
        *, step_s: float = 0.002, draft_disagree_every: int = 4
    ) -> Callable[..., FakeModel]:
        """An opener for Runtime: files whose name says "draft" become a disagreeing draft."""

        def open_model(config: ModelConfig, *, progress: LoadProgress | None = None) -> FakeModel:
            is_draft = "draft" in Path(config.path).name
            return FakeModel(
                config,
                progress=progress,
                step_s=step_s,
                disagree_every=draft_disagree_every if is_draft else 0,
            )

        return open_model

    def meta(self, key: str) -> str | None:
        return CHATML if key == "tokenizer.chat_template" else None

    def facts(self) -> ModelFacts:
        size = self.path.stat().st_size if self.path.exists() else 0
        return ModelFacts(
            path=str(self.path),
            n_vocab=self.n_vocab,
            n_ctx=self.n_ctx,
            n_ctx_train=self.n_ctx,
            n_layer=2,
            n_embd=8,
            n_head=2,
            n_head_kv=1,
            n_params=1000,
            weights_bytes=size,
            kv_cache_bytes=64 * self.n_ctx,
            n_gpu_layers=0,
        )

    def tokenize(
        self, text: str, *, add_special: bool = True, parse_special: bool = False
    ) -> list[int]:
        ids = [1] if add_special else []
        for piece in _PIECE.findall(text):
            if piece in SPECIALS and not parse_special:
                ids.extend(self._word_id(p) for p in piece)
            elif piece in VOCAB:
                ids.append(VOCAB.index(piece))
            else:
                ids.append(self._word_id(piece))
        return ids

    @staticmethod
    def _word_id(piece: str) -> int:
        return FIRST_WORD + sum(piece.encode()) % N_WORDS

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:
        if token < len(SPECIALS) and not special:
            return b""
        return VOCAB[token].encode()

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str:
        return b"".join(self.token_bytes(t, special=special) for t in tokens).decode()

    def is_eog(self, token: int) -> bool:
        return token in (EOS, 4)

    def token_text(self, token: int) -> str:
        return VOCAB[token]

    @property
    def bos_id(self) -> int:
        return 1

    @property
    def eos_id(self) -> int:
        return EOS

    @property
    def add_bos(self) -> bool:
        return True

    def feed(self, history: Sequence[int], n_logits: int) -> npt.NDArray[np.float32]:
        if self._closed:
            raise RuntimeError("feed on a closed model")
        if len(history) > self.n_ctx:
            raise ContextOverflowError(len(history), self.n_ctx)
        keep = 0
        while keep < min(len(self.tokens), len(history)) and self.tokens[keep] == history[keep]:
            keep += 1
        self.passes.append(max(len(history) - keep, n_logits))
        self.tokens = list(history)
        time.sleep(self.step_s)
        logits = np.full((n_logits, self.n_vocab), -10.0, dtype=np.float32)
        first = len(history) - n_logits
        for row in range(n_logits):
            position = first + row
            choice = next_word(history[position], position)
            if self.disagree_every and position % self.disagree_every == self.disagree_every - 1:
                choice = FIRST_WORD + (choice - FIRST_WORD + 1) % N_WORDS
            logits[row, choice] = 10.0
            # A runner-up, so sampling at a temperature has somewhere else to go.
            logits[row, FIRST_WORD + (choice - FIRST_WORD + 3) % N_WORDS] = 9.5
        return logits

    def truncate(self, n_keep: int) -> None:
        del self.tokens[n_keep:]

    def reset(self) -> None:
        self.tokens.clear()

    def close(self) -> None:
        self._closed = True
        self.tokens = []

    @property
    def closed(self) -> bool:
        return self._closed

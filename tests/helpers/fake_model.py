"""A stand-in for LlamaModel with words and a chat template, so the window runs in seconds.

It is the exactness harness's FakeLlama (tests/helpers/fake_llama.py: the same `feed`
contract) given a small word vocabulary, a tokenizer, a chat template, facts and load
behaviour, with a next-token rule that is a pure function of the previous token and its
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

from app.errors import Cancelled, ModelLoadError
from app.llama.config import ModelConfig
from app.llama.facts import ModelFacts
from app.llama.model import LoadProgress
from app.llama.prompt_cache import PromptCache
from app.llama.token_text import TokenText
from tests.helpers.fake_llama import FakeLlama, LogitFn, Logits

SPECIALS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
EOS = 2
TRAINED_CONTEXT = 8192  # what the fake says it was trained on, as SmolLM2 does
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


def word_logits(disagree_every: int = 0) -> LogitFn:
    """Logits peaked on next_word; with disagree_every=k, wrong at every k-th position."""

    def logits(history: Sequence[int]) -> Logits:
        position = len(history) - 1
        choice = next_word(history[-1], position)
        if disagree_every and position % disagree_every == disagree_every - 1:
            choice = FIRST_WORD + (choice - FIRST_WORD + 1) % N_WORDS
        row = np.full(len(VOCAB), -10.0, dtype=np.float32)
        row[choice] = 10.0
        # A runner-up, so sampling at a temperature has somewhere else to go.
        row[FIRST_WORD + (choice - FIRST_WORD + 3) % N_WORDS] = 9.5
        return row

    return logits


class FakeModel(FakeLlama):
    """Opens like LlamaModel(config, progress=...). `step_s` is slept per pass, so a reply
    lasts long enough for a test to stop or toggle it mid-way; a file named "broken…" fails to
    load."""

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
        super().__init__(
            word_logits(disagree_every),
            len(VOCAB),
            eog=(EOS, 4),
            n_ctx=config.n_ctx,
            name=config.path,
        )
        self.config = config
        self.n_batch = config.n_batch
        self.step_s = step_s
        self.prompt_cache = PromptCache(0)  # a fake restores nothing, so it saves nothing

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

    def feed(self, history: Sequence[int], n_logits: int) -> Logits:
        time.sleep(self.step_s)
        return super().feed(history, n_logits)

    def meta(self, key: str) -> str | None:
        return CHATML if key == "tokenizer.chat_template" else None

    def facts(self) -> ModelFacts:
        size = self.path.stat().st_size if self.path.exists() else 0
        return ModelFacts(
            path=str(self.path),
            n_vocab=self.n_vocab,
            n_ctx=self.n_ctx,
            n_ctx_train=TRAINED_CONTEXT,
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

    def token_text(self, token: int) -> str:
        return VOCAB[token]

    @property
    def bos_id(self) -> int:
        return 1

    # The BOS and EOS texts as the real vocabulary derives them from the ids above.
    bos_text = TokenText.bos_text
    eos_text = TokenText.eos_text

    @property
    def add_bos(self) -> bool:
        return True

    def truncate(self, n_keep: int) -> None:
        del self.tokens[n_keep:]

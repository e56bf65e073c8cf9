"""A hybrid drafter over a fake draft model whose every token costs a millisecond, and the
rounds the engine would report to it: what the hybrid's reading and weighing tests share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.engine.config import SamplingConfig
from app.engine.drafters import DraftRequest, ModelDrafter
from app.engine.hybrid_drafter import HybridDrafter
from app.engine.hybrid_rates import FADE
from app.engine.suffix_drafter import SuffixDrafter
from app.metrics.rounds import RoundRecord
from tests.helpers.fake_llama import FakeLlama, Logits

N_VOCAB = 1024


def next_token(history: Sequence[int]) -> Logits:
    row = np.zeros(N_VOCAB, dtype=np.float32)
    row[(history[-1] + 1) % N_VOCAB] = 10.0
    return row


def ask(history: Sequence[int], max_tokens: int) -> DraftRequest:
    """A round under γ auto, which gives a free limit; only then may the model sit out."""
    return DraftRequest(
        history, max_tokens, SamplingConfig(), np.random.default_rng(0), 0.0, free_limit=max_tokens
    )


def fake_hybrid() -> tuple[FakeLlama, HybridDrafter]:
    model = FakeLlama(next_token, N_VOCAB, n_ctx=2048, name="draft.gguf")
    # Each token the fake decodes costs a millisecond on this clock.
    clock = lambda: model.decoded * 1e-3  # noqa: E731
    return model, HybridDrafter(
        SuffixDrafter(), ModelDrafter(model, N_VOCAB, clock=clock), clock=clock
    )


def teach(hybrid: HybridDrafter, *, verify_s: float, draft_pass_s: float) -> None:
    """Rounds as the engine reports them: verification of n rows costs verify_s each, a model
    pass draft_pass_s, and the model's tokens are kept; every eighth round is plain, and a long
    stretch from the suffix index then ends the model's run of rounds."""
    for i in range(40):
        rows = 1 + i % 8
        steps = rows - 1
        hybrid.learn(
            RoundRecord(
                i, "hybrid", steps, steps, steps, steps + 1, steps * draft_pass_s, verify_s, steps
            )
        )
        if steps == 0:
            hybrid.learn(
                RoundRecord(i, "hybrid", 16, 16, 16, 17, 0.0, verify_s, 0, suffix_drafted=16)
            )


def cheap_kept_model_after_a_first_chat() -> tuple[FakeLlama, HybridDrafter]:
    """A draft model whose tokens are always kept, at 1 ms a pass against 20 ms a plain step
    (about 190 tokens/s against 50), that has read a first conversation (reading timed at
    1 ms a token)."""
    model, hybrid = fake_hybrid()
    teach(hybrid, verify_s=0.02, draft_pass_s=0.001)
    first = conversation(40, 0)
    hybrid.prefill(first[:-1])
    hybrid.propose(ask(first, 4))
    return model, hybrid


def conversation(length: int, start: int) -> list[int]:
    return [(start + i) % N_VOCAB for i in range(length)]


def measure_without_model(hybrid: HybridDrafter, *, verify_s: float, prompt: Sequence[int]) -> None:
    """A long conversation the model has not read, with nothing to repeat: plain steps of
    verify_s each until they have taken (faded) as long as reading it would, 1 ms a token;
    the next round reads it if that pays."""
    hybrid.prefill(prompt[:-1])
    for i in range(rounds_to_cover((len(prompt) - 1) * 1e-3, verify_s)):
        hybrid.propose(ask(prompt, 4))
        hybrid.learn(RoundRecord(1000 + i, "hybrid", 4, 0, 0, 1, 0.0, verify_s, 0))


def rounds_to_cover(seconds: float, round_s: float) -> int:
    """Rounds of round_s each until their time, faded as the hybrid fades it, reaches seconds."""
    total, rounds = 0.0, 0
    while total < seconds:
        total, rounds = total * FADE + round_s, rounds + 1
    return rounds


def plain_rounds_before_reading(
    hybrid: HybridDrafter, prompt: Sequence[int], *, first_round: int, limit: int = 40
) -> int | None:
    """A prompt the suffix index has nothing on, answered by plain steps of 20 ms until a round
    has the draft model draft: how many ran before it (None: none within `limit`)."""
    hybrid.prefill(prompt[:-1])
    for i in range(limit):
        if hybrid.propose(ask(prompt, 4)).steps:
            return i
        hybrid.learn(RoundRecord(first_round + i, "hybrid", 4, 0, 0, 1, 0.0, 0.02, 0))
    return None

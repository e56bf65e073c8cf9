"""A toy world for checking the speculative engine's exactness, and the runs over it.

A six-token vocabulary (id 5 ends a reply), a target whose logits are a seeded function of the
last two tokens plus a pull towards counting up (the prompt's own pattern, so prompt lookup finds
continuations the target likes), and a draft that is the target plus noise (p ≠ q, acceptance
between about 0.2 and 0.8). `run_engine` drives the real `SpeculativeEngine` and drafters over
`FakeLlama`s of these; `fits` compares its replies with plain sampling's exact distribution
(tests/helpers/plain_oracle.py).
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.constraint_types import ConstraintSpec
from app.engine.drafters import Draft, Drafter, DraftRequest, ModelDrafter, PromptLookupDrafter
from app.engine.events import FinishEvent
from app.engine.gamma import AUTO, fixed
from app.engine.hybrid_drafter import HybridDrafter
from app.engine.loop import SpeculativeEngine
from app.engine.suffix_drafter import SuffixDrafter
from app.metrics.rounds import RoundRecord
from tests.helpers.fake_llama import FakeLlama, blend, toy_logits
from tests.helpers.plain_oracle import (
    Fit,
    Reply,
    chi_square,
    counts,
    reply_distribution,
    window_distribution,
    windows,
)

N_VOCAB = 6
EOS = 5


def _count_up(history: Sequence[int]) -> np.ndarray:
    # A pull towards last + 1 (mod EOS): the prompt's own pattern, which prompt lookup copies.
    row = np.zeros(N_VOCAB, dtype=np.float32)
    row[(history[-1] + 1) % EOS] = 1.0
    return row


# The end token is less likely than the rest, so most replies reach the token budget.
TARGET = blend(
    toy_logits(11, N_VOCAB, order=2, scale=1.0, bias=[0.0] * EOS + [-1.0]), _count_up, 2.5
)
DRAFT = blend(TARGET, toy_logits(23, N_VOCAB, order=1, scale=1.0), 0.8)
# Repeats its own n-grams, so prompt lookup finds continuations at every length.
PROMPT = (0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2)

DrafterKind = Literal["sampled", "greedy", "lookup", "suffix", "tree", "hybrid", "none"]


@dataclass(frozen=True)
class Case:
    name: str
    drafter: DrafterKind
    gamma: int
    sampling: SamplingConfig
    length: int  # max_tokens; γ + 2: the prompt's pass draws the first, then a full round
    p_min: float = 0.0
    adaptive: bool = False  # γ auto: the draft length changes between rounds, pauses too
    runs: int = 1500


class ForwardingDrafter:
    """A drafter that hands every call to `inner`: the base of wrappers that change one."""

    def __init__(self, inner: Drafter) -> None:
        self.inner = inner
        self.mode = inner.mode
        self.label = inner.label

    def propose(self, ask: DraftRequest) -> Draft:
        return self.inner.propose(ask)

    def prefill(self, history: Sequence[int]) -> None:
        self.inner.prefill(history)

    def learn(self, record: RoundRecord) -> None:
        self.inner.learn(record)

    def close(self) -> None:
        self.inner.close()


class GreedyProposals(ForwardingDrafter):
    """The real ModelDrafter proposing its argmax, a point-mass q, while the target samples."""

    def propose(self, ask: DraftRequest) -> Draft:
        return self.inner.propose(replace(ask, sampling=replace(ask.sampling, temperature=0.0)))


def make_drafter(kind: DrafterKind, clock: Callable[[], float]) -> Drafter | None:
    if kind == "none":  # plain decoding, for comparisons
        return None
    if kind == "lookup":
        return PromptLookupDrafter(clock=clock)
    if kind == "suffix":
        return SuffixDrafter(clock=clock)
    if kind == "tree":  # the suffix index proposing token trees wherever it has alternatives
        return SuffixDrafter(trees="on", clock=clock)
    model = ModelDrafter(FakeLlama(DRAFT, N_VOCAB, name="draft.gguf"), N_VOCAB, clock=clock)
    if kind == "hybrid":
        # The suffix index's certain tokens first, the sampled draft's after them.
        return HybridDrafter(SuffixDrafter(clock=clock), model)
    return model if kind == "sampled" else GreedyProposals(model)


@dataclass
class Runs:
    replies: list[Reply]
    rounds: list[RoundRecord]


def run_engine(case: Case, constraint: ConstraintSpec | None = None) -> Runs:
    target = FakeLlama(TARGET, N_VOCAB, eog=[EOS], name="target.gguf")
    # A clock that ticks a millisecond per reading keeps γ auto's choices reproducible.
    ticks = itertools.count()

    def clock() -> float:
        return next(ticks) * 1e-3

    engine = SpeculativeEngine(target, make_drafter(case.drafter, clock), clock=clock)
    config = GenerationConfig(
        max_tokens=case.length,
        gamma=AUTO if case.adaptive else fixed(case.gamma),
        p_min=case.p_min,
        constraint=constraint,
    )
    # The engine measures one plain step before it speculates; a warm-up reply pays for it, so
    # every counted reply drafts from its first round.
    _generate(engine, replace(config, sampling=replace(case.sampling, seed=10**6)))
    out = Runs([], [])
    # Each case draws its own seeds, so that the cases are independent evidence.
    first = zlib.crc32(case.name.encode()) % 1_000_000 * 1_000
    for seed in range(first, first + case.runs):
        sampling = replace(case.sampling, seed=seed)
        reply, rounds = _generate(engine, replace(config, sampling=sampling))
        out.replies.append(reply)
        out.rounds.extend(rounds)
    return out


def _generate(
    engine: SpeculativeEngine, config: GenerationConfig
) -> tuple[Reply, list[RoundRecord]]:
    events = list(engine.generate(PROMPT, config))
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    result = finish.result
    stop = (EOS,) if result.finish_reason == "stop" else ()
    return tuple(result.token_ids) + stop, list(result.rounds)


def exact_replies(case: Case) -> dict[Reply, float]:
    return reply_distribution(TARGET, PROMPT, case.sampling, case.length, frozenset([EOS]))


def fits(case: Case, runs: Runs) -> list[tuple[tuple[int, int], Fit]]:
    exact = exact_replies(case)
    return [
        ((a, b), chi_square(counts(runs.replies, a, b), window_distribution(exact, a, b)))
        for a, b in windows(case.length)
    ]


def describe(found: list[tuple[tuple[int, int], Fit]]) -> str:
    return "; ".join(
        f"tokens {a + 1}-{b}: X²={f.statistic:.1f} dof={f.dof} p={f.p_value:.2e}"
        + (f" impossible={f.impossible}" if f.impossible else "")
        for (a, b), f in found
    )

"""The exactness harness under a grammar: replies follow the target's constrained distribution.

The grammar masks the target at verification and the draft model while it drafts; drafts that
are not masked (the suffix index inside the hybrid) propose forbidden tokens now and then, which
p = 0 rejects. The mutant masks only the draft, and the harness must catch it.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.engine import verification
from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.constraint import ConstraintCursor
from app.engine.drafters import DraftRequest, ModelDrafter
from app.engine.events import FinishEvent
from app.engine.gamma import OFF, fixed
from app.engine.loop import SpeculativeEngine
from app.engine.sampling import FloatArray, distribution
from tests.helpers.exact_engine import (
    DRAFT,
    EOS,
    N_VOCAB,
    PROMPT,
    TARGET,
    Case,
    Runs,
    describe,
    make_drafter,
    run_engine,
)
from tests.helpers.fake_llama import FakeLlama
from tests.helpers.plain_oracle import (
    Fit,
    chi_square,
    counts,
    reply_distribution,
    window_distribution,
    windows,
)
from tests.helpers.toy_grammar import NoCountingUp, NoCountingUpSpec, constrained, forbidden

# The family-wise false-alarm rate the harness states, split over these cases' windows.
ALPHA = 1e-3 / 6

SAMPLED = Case("grammar-sampled-g3", "sampled", 3, SamplingConfig(temperature=0.9, top_k=4), 4)
HYBRID = Case("grammar-hybrid-g4", "hybrid", 4, SamplingConfig(temperature=0.7), 5)
LOOKUP = Case("grammar-lookup-g3", "lookup", 3, SamplingConfig(temperature=0.8), 4)


def _fits(case: Case, runs: Runs) -> list[tuple[tuple[int, int], Fit]]:
    exact = reply_distribution(constrained, PROMPT, case.sampling, case.length, frozenset([EOS]))
    return [
        ((a, b), chi_square(counts(runs.replies, a, b), window_distribution(exact, a, b)))
        for a, b in windows(case.length)
    ]


def _min_p_value(case: Case, runs: Runs) -> tuple[float, str]:
    found = _fits(case, runs)
    return min(f.p_value for _, f in found), describe(found)


@pytest.mark.parametrize("case", [SAMPLED, HYBRID, LOOKUP], ids=lambda c: c.name)
def test_speculation_under_a_grammar_samples_the_constrained_distribution(case: Case) -> None:
    runs = run_engine(case, NoCountingUpSpec())
    for reply in runs.replies:
        for i, token in enumerate(reply):
            assert token == EOS or token != forbidden(reply[:i]), reply
    p_value, described = _min_p_value(case, runs)
    assert p_value >= ALPHA, described


def test_the_constrained_oracle_differs_from_the_plain_one() -> None:
    # Otherwise the mutant below could pass for want of a difference to find.
    plain = reply_distribution(TARGET, PROMPT, SAMPLED.sampling, 2, frozenset([EOS]))
    masked = reply_distribution(constrained, PROMPT, SAMPLED.sampling, 2, frozenset([EOS]))
    assert sum(abs(plain.get(r, 0.0) - masked.get(r, 0.0)) for r in plain | masked) > 0.5


@pytest.mark.parametrize("gamma", [2, 5])
def test_greedy_speculation_under_a_grammar_is_the_plain_constrained_greedy_reply(
    gamma: int,
) -> None:
    def reply(drafter_kind: str, g: int) -> list[int]:
        target = FakeLlama(TARGET, N_VOCAB, eog=[EOS], name="target.gguf")
        drafter = make_drafter(drafter_kind, lambda: 0.0)  # type: ignore[arg-type]
        engine = SpeculativeEngine(target, drafter)
        engine.plain_step_s = 1.0  # speculate from the first round
        config = GenerationConfig(
            max_tokens=12,
            gamma=fixed(g) if g else OFF,
            sampling=SamplingConfig(temperature=0.0),
            constraint=NoCountingUpSpec(),
        )
        *_, finish = engine.generate(PROMPT, config)
        assert isinstance(finish, FinishEvent)
        return list(finish.result.token_ids)

    expected = reply("none", 0)
    assert all(t != forbidden(expected[:i]) for i, t in enumerate(expected))
    assert reply("sampled", gamma) == expected
    assert reply("hybrid", gamma) == expected


def test_the_harness_rejects_a_grammar_applied_to_the_draft_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unmasked(
        row: np.ndarray, history: list[int], config: GenerationConfig, _grammar: object
    ) -> FloatArray:
        return distribution(row, history, config.sampling)

    monkeypatch.setattr(verification, "_distribution", unmasked)
    runs = run_engine(SAMPLED, NoCountingUpSpec())
    p_value, described = _min_p_value(SAMPLED, runs)
    assert p_value < ALPHA, f"a grammar on the draft only passed: {described}"


def _forbidden_proposals(drafter: ModelDrafter) -> int:
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(100):
        draft = drafter.propose(
            DraftRequest(list(PROMPT), 4, SamplingConfig(temperature=1.5), rng, 0.0)
        )
        for i, token in enumerate(draft.tokens):
            banned = forbidden(draft.tokens[:i])
            found += token == banned
            if drafter.constraint is not None:
                q = draft.probs[i]
                assert q is not None and q[banned] == 0.0
    return found


def test_the_draft_model_proposes_only_tokens_the_grammar_allows() -> None:
    target = FakeLlama(TARGET, N_VOCAB, eog=[EOS])
    drafter = ModelDrafter(FakeLlama(DRAFT, N_VOCAB), N_VOCAB)
    assert _forbidden_proposals(drafter) > 0  # unmasked, the draft likes counting up
    drafter.constraint = ConstraintCursor(NoCountingUp(), len(PROMPT), target)
    assert _forbidden_proposals(drafter) == 0

"""The real speculative engine reproduces plain sampling exactly: a statistical harness.

`SpeculativeEngine` runs with its real drafters (`ModelDrafter`, `PromptLookupDrafter`,
`SuffixDrafter`, and `HybridDrafter` joining the suffix index and a draft model), its
real sampling transform and acceptance rule, over deterministic fake models
(tests/helpers/fake_llama.py) whose logits are toy functions of the history, so the exact
distribution of plain sampling's replies can be enumerated (tests/helpers/plain_oracle.py).
Each configuration below runs the engine `runs` times, with seeds of its own, and compares the
replies' joint distribution over runs of three positions (the first three tokens, and further
windows up to the bonus token after a full draft of γ) with the exact one, by Pearson's
chi-square test.

False-alarm rate: the correct engine is declared inexact when any window of any configuration
(CASES, and VALID_VARIANTS of the draft) has p < ALPHA_FAMILY / (number of windows), Bonferroni;
so the chance that a correct engine fails this file is at most ALPHA_FAMILY = 1e-3 (nominal: the
chi-square law is asymptotic, which is why cells expecting fewer than 10 draws are pooled). The
seeds are fixed, so the outcome is reproducible; the rate is over the choice of seeds.

Power: MUTANTS lists plausible bugs, each applied by monkeypatching the engine's own functions;
every one must be rejected at the same per-window threshold. The real-model tests
(test_engine_sampling.py and others) stay: this file adds power, it does not replace them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from app.engine import acceptance, drafters, hybrid_drafter, suffix_drafter, verification
from app.engine.config import SamplingConfig
from app.engine.drafters import Draft, DraftRequest, ModelDrafter
from app.engine.hybrid_drafter import HybridDrafter
from app.engine.loop import SpeculativeEngine
from app.engine.sampling import FloatArray, distribution, sample
from app.engine.suffix_drafter import SuffixDrafter
from tests.helpers.exact_engine import (
    EOS,
    PROMPT,
    TARGET,
    Case,
    DrafterKind,
    describe,
    exact_replies,
    fits,
    run_engine,
)
from tests.helpers.plain_oracle import (
    chi_square,
    reply_distribution,
    window_distribution,
    windows,
)

ALPHA_FAMILY = 1e-3

CASES = [
    Case("sampled-g1", "sampled", 1, SamplingConfig(temperature=0.7, top_k=4), 4),
    Case(
        "sampled-g2",
        "sampled",
        2,
        SamplingConfig(temperature=1.4, top_p=0.85, repeat_penalty=1.3),
        4,
    ),
    Case(
        "sampled-g3",
        "sampled",
        3,
        SamplingConfig(temperature=0.8, min_p=0.08, repeat_penalty=1.6, repeat_last_n=4),
        5,
    ),
    Case(
        "sampled-g4",
        "sampled",
        4,
        SamplingConfig(temperature=0.6, top_k=4, top_p=0.9, min_p=0.05, repeat_penalty=1.2),
        6,
    ),
    Case(
        "sampled-g5-pmin",
        "sampled",
        5,
        SamplingConfig(temperature=0.9, top_k=3, repeat_penalty=1.3),
        7,
        p_min=0.4,
    ),
    Case(
        "sampled-g6", "sampled", 6, SamplingConfig(temperature=0.5, top_k=3, repeat_penalty=1.4), 8
    ),
    Case("greedy-g2", "greedy", 2, SamplingConfig(temperature=0.8, top_k=4, repeat_penalty=1.3), 4),
    Case("greedy-g4-pmin", "greedy", 4, SamplingConfig(temperature=1.2, top_p=0.8), 6, p_min=0.4),
    Case("greedy-g6", "greedy", 6, SamplingConfig(temperature=0.6, top_k=3, min_p=0.1), 8),
    # No truncation: every reply stays possible, so only the counts can tell a bug apart.
    Case(
        "sampled-g2-full",
        "sampled",
        2,
        SamplingConfig(temperature=0.8, repeat_penalty=1.8, repeat_last_n=3),
        4,
    ),
    Case("lookup-g3", "lookup", 3, SamplingConfig(temperature=0.7, repeat_penalty=1.1), 5),
    Case("lookup-g6", "lookup", 6, SamplingConfig(temperature=0.5, top_k=3), 8),
    # The suffix index proposes what most often followed the longest match, a point mass.
    Case("suffix-g4", "suffix", 4, SamplingConfig(temperature=0.7, repeat_penalty=1.1), 6),
    Case(
        "suffix-auto",
        "suffix",
        4,
        SamplingConfig(temperature=0.6, top_k=4),
        7,
        adaptive=True,
    ),
    # Suffix tokens (q a point mass) then draft-model tokens (q sampled) in one draft.
    Case("hybrid-g4", "hybrid", 4, SamplingConfig(temperature=0.8, top_k=4), 6),
    Case(
        "hybrid-auto",
        "hybrid",
        4,
        SamplingConfig(temperature=1.1, top_k=5, repeat_penalty=1.2),
        7,
        adaptive=True,
    ),
    Case(
        "sampled-auto",
        "sampled",
        4,
        SamplingConfig(temperature=1.3, top_k=5, min_p=0.05, repeat_penalty=1.2),
        7,
        adaptive=True,
    ),
    # γ auto with a greedy draft: the confidence stop reads margins of the draft's softmax.
    Case(
        "greedy-auto",
        "greedy",
        4,
        SamplingConfig(temperature=0.9, top_k=4, repeat_penalty=1.2),
        7,
        adaptive=True,
    ),
]
CASE = {case.name: case for case in CASES}


# -- a draft may propose from any q it reports truthfully -------------------------------------

Patch = Callable[[pytest.MonkeyPatch], None]


def consistent_q_at_temperature_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The draft samples from, and reports, a q that ignores temperature: slower, still exact."""

    def q(logits: np.ndarray, history: Sequence[int], config: SamplingConfig) -> FloatArray:
        return distribution(logits, history, replace(config, temperature=1.0))

    monkeypatch.setattr(drafters, "distribution", q)


def confidence_stop_at_near_ties(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every round's draft ends after a token whose margin is under 0.25: how many tokens are
    proposed depends on the draft's own distribution only, so sampling stays exact."""
    real = ModelDrafter.propose

    def with_stop(self: ModelDrafter, ask: DraftRequest) -> Draft:
        return real(self, replace(ask, stop=ask.stop or (lambda margin: margin >= 0.25)))

    monkeypatch.setattr(ModelDrafter, "propose", with_stop)


def hybrid_always_both(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every round with a suffix match drafts both: its tokens first, the draft model after
    them. Which source drafts is the drafter's choice alone, so sampling stays exact."""

    def plan(self: HybridDrafter, proposal: Any, gamma: int, *_rest: object) -> Any:
        prefix = proposal.tokens[: max(1, gamma - 1)]
        return hybrid_drafter._Plan(prefix, max(1, gamma - len(prefix)), 1.0)

    monkeypatch.setattr(HybridDrafter, "_plan", plan)


# Lengths of the drafts the suffix index picked its text up again with (the variant below).
RESUMED: list[int] = []


def resume_after_any_match(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suffix index picks its text up again after a break that follows any match, not only
    a 16-token one (the toy prompt's matches are short): a resumed draft is a point mass made
    from the history alone, like the index's own, so sampling stays exact."""
    RESUMED.clear()
    monkeypatch.setattr(suffix_drafter, "FOLLOWED_MATCH", 2)
    real = SuffixDrafter._resume

    def counted(self: SuffixDrafter, history: Sequence[int], max_tokens: int) -> Any:
        proposal = real(self, history, max_tokens)
        if proposal.tokens:
            RESUMED.append(len(proposal.tokens))
        return proposal

    monkeypatch.setattr(SuffixDrafter, "_resume", counted)


VALID_VARIANTS: list[tuple[str, Patch, str]] = [
    ("consistent q at temperature 1", consistent_q_at_temperature_one, "sampled-g6"),
    ("confidence stop, sampled draft", confidence_stop_at_near_ties, "sampled-g6"),
    ("confidence stop, greedy draft", confidence_stop_at_near_ties, "greedy-g6"),
    ("hybrid, suffix then draft model every round", hybrid_always_both, "hybrid-g4"),
    ("suffix index picking its text up after every break", resume_after_any_match, "suffix-g4"),
]
N_WINDOWS = sum(len(windows(c.length)) for c in CASES) + sum(
    len(windows(CASE[name].length)) for _, _, name in VALID_VARIANTS
)
ALPHA = ALPHA_FAMILY / N_WINDOWS  # per window, for the correct engine and the mutants alike


# -- the oracle itself -----------------------------------------------------------------------


def test_the_sampling_transform_matches_a_hand_worked_case() -> None:
    # logits 2.0, 1.0, 0.5, -0.3, -1.0, 0.1; ids 0 and 3 were seen, penalty 1.25:
    # id 0: 2.0 / 1.25 = 1.6 and id 3: -0.3 * 1.25 = -0.375.
    logits = np.array([2.0, 1.0, 0.5, -0.3, -1.0, 0.1], dtype=np.float32)
    config = SamplingConfig(temperature=0.5, top_k=4, top_p=0.9, min_p=0.2, repeat_penalty=1.25)
    # top-k 4 keeps ids 0, 1, 2, 5 (1.6, 1.0, 0.5, 0.1). Their softmax at temperature 1:
    z = np.array([1.6, 1.0, 0.5, 0.1])
    soft = np.exp(z) / np.exp(z).sum()  # 0.4751, 0.2607, 0.1581, 0.1060 (rounded)
    # top-p 0.9: the first three hold 0.8940 < 0.9, so id 5 is needed to reach it. min-p 0.2
    # cuts at 0.2 * 0.4751 = 0.0950 <= 0.1060: id 5 stays. Temperature 0.5 over the four.
    assert soft[:3].sum() < 0.9 <= soft.sum() and soft[3] >= 0.2 * soft[0]
    scaled = np.exp(z / 0.5)
    expected = np.zeros(6)
    expected[[0, 1, 2, 5]] = scaled / scaled.sum()
    got = distribution(logits, [0, 3], config)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    # With min-p 0.25 the cut 0.1188 drops id 5 (0.1060); ids 0, 1 and 2 remain.
    tighter = distribution(logits, [0, 3], replace(config, min_p=0.25))
    assert np.flatnonzero(tighter).tolist() == [0, 1, 2]


def test_the_enumeration_is_the_product_of_plain_sampling_steps() -> None:
    sampling = SamplingConfig(temperature=0.8, top_k=4, repeat_penalty=1.3)
    exact = reply_distribution(TARGET, PROMPT, sampling, 3, frozenset([EOS]))
    assert sum(exact.values()) == pytest.approx(1.0, abs=1e-12)
    reply = max(exact, key=lambda r: exact[r] if len(r) == 3 else 0.0)
    history = list(PROMPT)
    mass = 1.0
    for token in reply:
        mass *= distribution(TARGET(history), history, sampling)[token]
        history.append(token)
    assert exact[reply] == pytest.approx(mass, rel=1e-12)
    # An end token ends the reply: every reply holding one holds it last.
    assert all(EOS not in r[:-1] for r in exact)
    assert any(r[-1] == EOS for r in exact)


def test_the_chi_square_test_keeps_its_false_alarm_rate_on_exact_draws() -> None:
    # Draw straight from an exact window distribution: a 5 % test should reject about 5 %.
    exact = window_distribution(exact_replies(CASE["sampled-g6"]), 0, 3)
    keys = list(exact)
    probs = np.array([exact[k] for k in keys])
    rng = np.random.default_rng(7)
    trials = 400
    rejected = 0
    for _ in range(trials):
        draws = rng.multinomial(1500, probs / probs.sum())
        observed = {k: int(c) for k, c in zip(keys, draws, strict=True) if c}
        rejected += chi_square(Counter(observed), exact).p_value < 0.05
    # Binomial(400, 0.05): mean 20, sd 4.4; outside 5..40 is a miscalibrated test.
    assert 5 <= rejected <= 40


# -- the correct engine ----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_engine_samples_exactly_like_plain_decoding(case: Case) -> None:
    runs = run_engine(case)
    found = fits(case, runs)
    assert all(f.p_value >= ALPHA for _, f in found), describe(found)
    # The configuration exercised what it claims: rejections, and full drafts of γ (or of
    # what lookup found) that ended on a bonus token.
    drafted = [r for r in runs.rounds if r.drafted]
    assert any(r.accepted < r.drafted for r in drafted)
    assert any(r.accepted == r.drafted and r.emitted == r.drafted + 1 for r in drafted)
    if case.adaptive:
        assert len({r.gamma for r in drafted}) >= 2  # γ auto changed the draft length
    elif case.p_min:
        assert any(0 < r.drafted < r.gamma for r in drafted)  # the draft stopped, unsure
    elif case.drafter not in ("lookup", "suffix"):
        assert any(r.drafted == case.gamma for r in drafted)


@pytest.mark.parametrize("kind", ["sampled", "lookup", "suffix", "hybrid"])
@pytest.mark.parametrize("gamma", range(1, 7))
def test_greedy_speculation_gives_the_plain_greedy_reply(kind: DrafterKind, gamma: int) -> None:
    sampling = SamplingConfig(temperature=0.0, repeat_penalty=1.3, repeat_last_n=6)
    case = Case(f"greedy-target-{kind}-g{gamma}", kind, gamma, sampling, 12, runs=3)
    (plain,) = exact_replies(case)
    runs = run_engine(case)
    assert runs.replies == [plain] * case.runs
    assert any(r.accepted for r in runs.rounds)


@pytest.mark.parametrize("case_name", ["lookup-g6", "suffix-g4", "suffix-auto", "greedy-g6"])
def test_a_seeded_reply_with_certain_drafts_is_the_plain_seeded_reply(case_name: str) -> None:
    """Drafts whose tokens are certain (the suffix index, lookup, a greedy draft) are checked
    with the draws plain sampling makes, so for a seed the reply is plain decoding's, token for
    token, whatever the draft proposed or γ auto chose."""
    case = replace(CASE[case_name], runs=40)
    spec = run_engine(case)
    plain = run_engine(replace(case, drafter="none"))
    assert spec.replies == plain.replies
    assert any(r.accepted for r in spec.rounds) and not any(r.drafted for r in plain.rounds)


@pytest.mark.parametrize(
    ("name", "variant", "case_name"), VALID_VARIANTS, ids=[v[0] for v in VALID_VARIANTS]
)
def test_the_harness_accepts_a_valid_variant_of_the_draft(
    name: str, variant: Patch, case_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASE[case_name]
    variant(monkeypatch)
    runs = run_engine(case)
    found = fits(case, runs)
    assert all(f.p_value >= ALPHA for _, f in found), f"{name}: {describe(found)}"
    assert any(r.accepted < r.drafted for r in runs.rounds)
    if case.drafter == "hybrid":  # mixed drafts ran, and some reached the model's tokens
        assert any(r.source == "both" and r.accepted > r.suffix_drafted for r in runs.rounds)
    if variant is resume_after_any_match:  # resumed drafts ran, and not only a few
        assert len(RESUMED) >= 100


@pytest.mark.parametrize("case_name", ["sampled-g6", "greedy-g6"])
def test_the_confidence_stop_variant_ends_drafts_early(
    case_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    confidence_stop_at_near_ties(monkeypatch)
    runs = run_engine(replace(CASE[case_name], runs=100))
    assert any(0 < r.drafted < r.gamma for r in runs.rounds)
    assert any(r.drafted == r.gamma for r in runs.rounds)


# -- mutants: each must fail ------------------------------------------------------------------


def _softmax(row: FloatArray) -> FloatArray:
    shifted = np.exp(row.astype(np.float64) - float(row.max()))
    out: FloatArray = shifted / shifted.sum()
    return out


def _rewrite_q(make_q: Callable[[np.ndarray, list[int], SamplingConfig], FloatArray]) -> Patch:
    """The draft samples from the right q but reports another one to the acceptance test."""

    def apply(monkeypatch: pytest.MonkeyPatch) -> None:
        real = ModelDrafter.propose

        def propose(self: ModelDrafter, ask: DraftRequest) -> Draft:
            draft = real(self, ask)
            probs: list[FloatArray | None] = []
            for i, q in enumerate(draft.probs):
                sequence = [*ask.history, *draft.tokens[:i]]
                row = self.model.feed(sequence, 1)[0]
                probs.append(None if q is None else make_q(row, sequence, ask.sampling))
            return replace(draft, probs=probs)

        monkeypatch.setattr(ModelDrafter, "propose", propose)

    return apply


q_from_unprocessed_logits = _rewrite_q(lambda row, _seq, _sampling: _softmax(row))
q_without_temperature = _rewrite_q(
    lambda row, seq, sampling: distribution(row, seq, replace(sampling, temperature=1.0))
)


def stale_penalty_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """p at every draft position is penalised by the history as the round began."""
    real_verify = SpeculativeEngine._verify
    round_start = [0]

    def verify(self: SpeculativeEngine, tokens: list[int], *rest: object) -> object:
        round_start[0] = len(tokens)
        return real_verify(self, tokens, *rest)  # type: ignore[arg-type]

    def stale(logits: np.ndarray, history: Sequence[int], config: SamplingConfig) -> FloatArray:
        return distribution(logits, history[: round_start[0]], config)

    monkeypatch.setattr(SpeculativeEngine, "_verify", verify)
    monkeypatch.setattr(verification, "distribution", stale)


def bonus_from_wrong_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bonus token is drawn from the last draft position's row, not the row after it."""
    real_verify = SpeculativeEngine._verify

    def verify(
        self: SpeculativeEngine, tokens: list[int], draft: Draft, rows: np.ndarray, *rest: object
    ) -> object:
        if len(rows) > 1:
            rows = rows.copy()
            rows[-1] = rows[-2]
        return real_verify(self, tokens, draft, rows, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(SpeculativeEngine, "_verify", verify)


def accept_with_q_over_p(monkeypatch: pytest.MonkeyPatch) -> None:
    def probability(p: FloatArray, q: FloatArray | None, x: int) -> float:
        qx = 1.0 if q is None else float(q[x])
        return 1.0 if p[x] <= 0.0 else min(1.0, qx / float(p[x]))

    monkeypatch.setattr(acceptance, "acceptance_probability", probability)


def residual_from_p(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acceptance, "residual", lambda p, _q, _x: p)


def point_mass_kept_when_most_likely(monkeypatch: pytest.MonkeyPatch) -> None:
    """A certain draft token is kept when it is p's most likely token, instead of when a draw
    from p gives it: right for greedy decoding, wrong for sampling."""
    real = acceptance.accept_or_correct

    def accept(
        p: FloatArray, q: FloatArray | None, x: int, rng: np.random.Generator
    ) -> tuple[bool, int]:
        if q is None:
            token = int(np.argmax(p)) if int(np.argmax(p)) == x else sample(p, rng)
            return token == x, token
        return real(p, q, x, rng)

    monkeypatch.setattr(verification, "accept_or_correct", accept)


def hybrid_q_on_the_wrong_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mixed draft lists the draft model's q first, so suffix tokens are judged against the
    model's q and the model's tokens as certain ones."""
    hybrid_always_both(monkeypatch)
    real = HybridDrafter.propose

    def propose(self: HybridDrafter, ask: DraftRequest) -> Draft:
        draft = real(self, ask)
        if 0 < draft.suffix_tokens < len(draft.tokens):
            n = draft.suffix_tokens
            return replace(draft, probs=draft.probs[n:] + draft.probs[:n])
        return draft

    monkeypatch.setattr(HybridDrafter, "propose", propose)


MUTANTS: list[tuple[str, Patch, str]] = [
    ("q from unprocessed draft logits", q_from_unprocessed_logits, "sampled-g4"),
    ("q without temperature", q_without_temperature, "sampled-g6"),
    ("stale penalty history", stale_penalty_history, "sampled-g3"),
    ("stale penalty history", stale_penalty_history, "sampled-g2-full"),
    ("bonus from the wrong row", bonus_from_wrong_row, "sampled-g2-full"),
    ("bonus from the wrong row", bonus_from_wrong_row, "lookup-g3"),
    ("min(1, q/p)", accept_with_q_over_p, "sampled-g2-full"),
    ("min(1, q/p)", accept_with_q_over_p, "hybrid-g4"),
    ("residual from p", residual_from_p, "sampled-g2"),
    ("residual from p", residual_from_p, "hybrid-auto"),
    ("point mass kept when most likely", point_mass_kept_when_most_likely, "lookup-g3"),
    ("point mass kept when most likely", point_mass_kept_when_most_likely, "suffix-g4"),
    ("point mass kept when most likely", point_mass_kept_when_most_likely, "greedy-g2"),
    ("hybrid q on the wrong tokens", hybrid_q_on_the_wrong_tokens, "hybrid-g4"),
]


@pytest.mark.parametrize(
    ("name", "mutant", "case_name"), MUTANTS, ids=[f"{m[0]} @ {m[2]}" for m in MUTANTS]
)
def test_the_harness_rejects_each_mutant(
    name: str, mutant: Patch, case_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASE[case_name]
    mutant(monkeypatch)
    found = fits(case, run_engine(case))
    assert min(f.p_value for _, f in found) < ALPHA, f"{name} passed: {describe(found)}"

"""The metric definitions every view shares, computed from rounds.

Pure functions only: no clocks, no llama.cpp. Undefined ratios are None (shown as "—"), never 0,
because "0 % accepted" and "nothing drafted" mean different things.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.metrics import measured
from app.metrics.measured import ratio
from app.metrics.rounds import RoundRecord

METRIC_DEFINITIONS: dict[str, str] = {
    "drafted": "draft tokens proposed and sent to verification",
    "accepted": "draft tokens the target kept",
    "model_accepted": "draft tokens the target kept that a draft model proposed",
    "suffix_accepted": (
        "draft tokens the target kept that the suffix index proposed from the text of this "
        "chat and past chats"
    ),
    "acceptance_rate": "accepted / drafted (— when nothing was drafted)",
    "alpha": (
        "the cost model's α: accepted / judged draft positions (every kept one plus the first "
        "refused; positions after a refusal are never judged), so it is at least the "
        "acceptance rate"
    ),
    "rounds": "target verification passes",
    "accepted_per_round": "accepted / rounds",
    "tokens_per_round": (
        "accepted per round + 1: the draft tokens a round kept and the target's own token, "
        "the end of the reply included (a plain step is exactly 1)"
    ),
    "per_position_acceptance": (
        "for draft position i: rounds that accepted i / rounds that drafted i"
    ),
    "tokens_per_second": (
        "generated tokens after the first / wall time from the first token to the last (the "
        "first is drawn from the prompt's pass, with the target's prompt processing)"
    ),
    "ttft_s": "time from request to first generated token",
    "draft_s": "wall time spent drafting",
    "draft_prefill_s": (
        "wall time the draft spent reading the prompt (a draft model reads it once the first "
        "token is out, so it is generation time: the tokens after the first wait for it)"
    ),
    "draft_catchup_s": (
        "wall time the draft spent reading tokens accepted while speculation was paused "
        "(not in draft_s or c_draft)"
    ),
    "verify_s": "wall time spent in target passes",
    "c_draft": (
        "one draft step's time / one plain target step's time (the suffix index, which runs no "
        "steps: per proposed token)"
    ),
    "c_verify": "one verification pass's time / one plain target step's time",
    "gamma": "mean γ asked for over the rounds that speculated (0: every round ran plain); "
    "the chat history's free tokens may draft past it",
    "gamma_histogram": "rounds by the draft length they ran at (0: plain steps)",
}


@dataclass(frozen=True, slots=True)
class GenerationStats:
    prompt_tokens: int
    generated_tokens: int
    gamma: float
    gamma_histogram: dict[int, int]
    drafted: int
    accepted: int
    acceptance_rate: float | None
    rounds: int
    accepted_per_round: float | None
    tokens_per_round: float | None
    per_position_acceptance: list[float | None]
    tokens_per_second: float | None
    ttft_s: float | None
    prompt_s: float
    draft_prefill_s: float
    generation_s: float
    draft_s: float
    verify_s: float
    c_draft: float | None
    c_verify: float | None
    draft_catchup_s: float = 0.0
    # The accepted tokens by what proposed them: the suffix index (the chat's own text) or a
    # draft model; they add up to `accepted`.
    suffix_accepted: int = 0
    model_accepted: int = 0
    # Seconds of the rounds outside the draft and target passes (RoundRecord.overhead_s).
    overhead_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def per_position_acceptance(rounds: Sequence[RoundRecord]) -> list[float | None]:
    """Acceptance by 1-based draft position; position i counts only rounds that drafted i."""
    longest = max((r.drafted for r in rounds), default=0)
    drafted_at = [0] * longest
    accepted_at = [0] * longest
    for r in rounds:
        for i in range(r.drafted):
            drafted_at[i] += 1
            if i < r.accepted:
                accepted_at[i] += 1
    return [ratio(a, d) for a, d in zip(accepted_at, drafted_at, strict=True)]


def summarize(
    rounds: Sequence[RoundRecord],
    *,
    prompt_tokens: int,
    generated_tokens: int,
    prompt_s: float,
    generation_s: float,
    ttft_s: float | None,
    plain_step_s: float | None,
    draft_prefill_s: float = 0.0,
) -> GenerationStats:
    """Fold a reply's rounds into its stats.

    plain_step_s is the measured time of one plain target step (None if never measured); the
    c_draft and c_verify costs are expressed in that unit, as the cost model needs. γ is what
    ran, read from the rounds, not what was asked for.
    """
    drafted = sum(r.drafted for r in rounds)
    accepted = sum(r.accepted for r in rounds)
    n_rounds = len(rounds)
    # fsum: a reply of no rounds (its one token drawn from the prompt's pass) spent 0.0 s, a
    # float like every other time in the JSON, where sum() would give the integer 0.
    draft_s = math.fsum(r.draft_s for r in rounds)
    verify_s = math.fsum(r.verify_s for r in rounds)
    return GenerationStats(
        prompt_tokens=prompt_tokens,
        generated_tokens=generated_tokens,
        gamma=measured.mean_gamma(rounds),
        gamma_histogram=measured.gamma_histogram(rounds),
        drafted=drafted,
        accepted=accepted,
        acceptance_rate=ratio(accepted, drafted),
        rounds=n_rounds,
        accepted_per_round=ratio(accepted, n_rounds),
        tokens_per_round=measured.tokens_per_round(rounds),
        per_position_acceptance=per_position_acceptance(rounds),
        tokens_per_second=measured.decode_rate(generated_tokens, generation_s),
        ttft_s=ttft_s,
        prompt_s=prompt_s,
        draft_prefill_s=draft_prefill_s,
        generation_s=generation_s,
        draft_s=draft_s,
        verify_s=verify_s,
        c_draft=measured.c_draft(rounds, plain_step_s),
        c_verify=measured.c_verify(rounds, plain_step_s),
        draft_catchup_s=math.fsum(r.draft_catchup_s for r in rounds),
        suffix_accepted=sum(r.accepted_from_suffix for r in rounds),
        model_accepted=accepted - sum(r.accepted_from_suffix for r in rounds),
        overhead_s=math.fsum(r.overhead_s for r in rounds),
    )

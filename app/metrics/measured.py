"""The cost model's inputs, measured from rounds: the one derivation of each, shared by the
engine's stats, γ auto, the Insight panel and the benchmark.

Costs are in plain target steps: seconds divided by `unit`, the seconds of one plain step
(whoever measured it: the engine's running mean, or plain decoding on the same prompts).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from app.metrics.cost_model import VerifyLine, fit_verify_line
from app.metrics.rounds import RoundRecord


def ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, None when the denominator is zero (undefined, not 0)."""
    return numerator / denominator if denominator else None


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def decoded(generated_tokens: int) -> int:
    """The tokens a reply's generation time is spent on: all but the first, which is drawn from
    the prompt's pass (llama-server counts its decode rate so too)."""
    return max(generated_tokens - 1, 0)


def decode_rate(generated_tokens: int, generation_s: float) -> float | None:
    """Tokens per second of generation: those after the first, over the time after it."""
    return ratio(decoded(generated_tokens), generation_s) if generated_tokens > 1 else None


def tokens_per_round(rounds: Sequence[RoundRecord]) -> float | None:
    """Tokens a target pass yields: the draft tokens it kept and one of its own, so a plain
    step is exactly 1. The pass that draws the end of the reply yields its token too, though
    the reply does not show it: counted by what was shown, a plain reply read below one token
    a step, and the cost model's E (accepted + 1 a round) no longer matched the measurement."""
    return ratio(sum(r.accepted for r in rounds) + len(rounds), len(rounds))


def judged_positions(drafted: int, accepted: int) -> int:
    """Draft positions the target judged in one round: every kept one plus the first refused.

    Positions after the first rejection were never judged, so they are no trials of acceptance;
    counting them would bias later positions downwards.
    """
    return min(accepted + 1, drafted)


def conditional_acceptance(rounds: Iterable[RoundRecord]) -> list[float | None]:
    """Acceptance of position i given 1..i-1 were kept; only judged positions are trials."""
    judged: list[int] = []
    kept: list[int] = []
    for r in rounds:
        n = judged_positions(r.drafted, r.accepted)
        while len(judged) < n:
            judged.append(0)
            kept.append(0)
        for i in range(n):
            judged[i] += 1
            kept[i] += 1 if i < r.accepted else 0
    return [ratio(k, j) for k, j in zip(kept, judged, strict=True)]


def judged_acceptance(rounds: Iterable[RoundRecord]) -> float | None:
    """α: accepted / judged positions (the cost model's α, above accepted / drafted)."""
    accepted = judged = 0
    for r in rounds:
        accepted += r.accepted
        judged += judged_positions(r.drafted, r.accepted)
    return ratio(accepted, judged)


def plain_step_s(rounds: Iterable[RoundRecord]) -> float | None:
    """Mean seconds of the plain steps (one-row target passes) among `rounds`."""
    return mean([r.verify_s for r in rounds if not r.speculative])


def c_draft(rounds: Sequence[RoundRecord], unit: float | None) -> float | None:
    """Seconds of one draft step, in plain steps.

    Every draft pass counts, also those of a round whose draft then proposed nothing (the p_min
    stop): they were paid. A drafter that runs no passes (the suffix index) is billed per proposed
    token instead, so γ · c_draft prices its rounds as well.
    """
    if not unit:
        return None
    steps = sum(r.draft_steps for r in rounds)
    if steps:
        return math.fsum(r.draft_s for r in rounds if r.draft_steps) / steps / unit
    proposed = sum(r.drafted for r in rounds)
    if proposed:
        return math.fsum(r.draft_s for r in rounds if r.speculative) / proposed / unit
    return None


def c_verify(rounds: Iterable[RoundRecord], unit: float | None) -> float | None:
    """Mean seconds of one verification pass (speculative rounds only), in plain steps."""
    seconds = mean([r.verify_s for r in rounds if r.speculative])
    return seconds / unit if seconds is not None and unit else None


def verify_cost_by_length(rounds: Iterable[RoundRecord], unit: float) -> dict[int, float]:
    """Mean verification cost in plain steps for each draft length that was verified."""
    by_length: dict[int, list[float]] = {}
    for r in rounds:
        if r.speculative:
            by_length.setdefault(r.drafted, []).append(r.verify_s)
    return {n: math.fsum(v) / len(v) / unit for n, v in by_length.items()}


def fit_verify(rounds: Iterable[RoundRecord], unit: float) -> VerifyLine | None:
    """The verify line through the mean cost at each row count, anchored by the plain step."""
    points = [(1.0, 1.0, 1.0)]  # the unit: one plain step is a one-row pass
    points += [(n + 1.0, cost, 1.0) for n, cost in verify_cost_by_length(rounds, unit).items()]
    return fit_verify_line(points)


def speculative_gammas(rounds: Iterable[RoundRecord]) -> list[int]:
    """The γ each speculative round asked for, in order."""
    return [r.gamma for r in rounds if r.speculative]


def mean_gamma(rounds: Iterable[RoundRecord]) -> float:
    """Mean γ over the speculative rounds (0 if none did): the length each asked for, or where
    a confidence stop ended it, ran to. The suffix index's tokens cost no draft pass and may run
    past it (RoundRecord.drafted counts what was verified)."""
    return mean([float(g) for g in speculative_gammas(rounds)]) or 0.0


def gamma_histogram(rounds: Iterable[RoundRecord]) -> dict[int, int]:
    """Rounds by the γ they ran at, ascending; plain steps count under 0."""
    counts: dict[int, int] = {}
    for r in rounds:
        gamma = r.gamma if r.speculative else 0
        counts[gamma] = counts.get(gamma, 0) + 1
    return dict(sorted(counts.items()))

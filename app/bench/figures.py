"""The figures of one benchmark configuration, folded from its timed runs (pure, no models).

Costs are in units of one plain target step as measured by the plain runs on the same prompts,
so c_draft, c_verify and the predictions share the unit the speedup is relative to. Every
acceptance and cost figure comes from app/metrics/measured.py, the arithmetic the engine's stats,
γ auto and the Insight panel use too: `acceptance_rate` is accepted / drafted (the metrics
table), `alpha` accepted / judged positions (the cost model's α).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.metrics import measured as m
from app.metrics.cost_model import expected_tokens, expected_tokens_by_position
from app.metrics.measured import ratio
from app.metrics.rounds import RoundRecord
from app.metrics.summary import per_position_acceptance


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One timed generation: which config, prompt and repeat, and what the engine reported."""

    sequence: int
    config: int
    prompt: int
    repeat: int
    prompt_class: str
    prompt_tokens: int
    token_ids: tuple[int, ...]
    finish_reason: str
    generation_s: float
    ttft_s: float | None
    rounds: tuple[RoundRecord, ...]
    notices: tuple[str, ...] = ()
    draft_prefill_s: float = 0.0
    rss_bytes: int | None = None
    vram_bytes: int | None = None
    # Runs of one phase ran side by side with the same models loaded; a draft loaded for a
    # later phase is compared with the plain runs of its own phase only.
    phase: int = 0

    @property
    def generated_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def decoded_tokens(self) -> int:
        """The tokens generation_s was spent on (app/metrics/measured.decoded)."""
        return m.decoded(len(self.token_ids))


@dataclass(frozen=True, slots=True)
class Figures:
    """The measured figures of one configuration over a set of runs (all prompts or one class).

    mean_gamma and gamma_histogram read the γ each round ran at (plain steps count under 0).
    """

    runs: int
    generated_tokens: int
    generation_s: float
    tokens_per_second: float | None
    speedup: float | None
    speedup_min: float | None
    speedup_max: float | None
    # The median paired speedup: a stall in some blocks moves the aggregate (total tokens over
    # total seconds) but not this, so the two apart show what the stall cost.
    speedup_median: float | None
    # The widest spread (max / min) of one prompt's paired speedups over its repeats.
    speedup_repeat_spread: float | None
    speedup_second_half: float | None
    drafted: int
    accepted: int
    # The accepted tokens by what proposed them (they add up to `accepted`): the suffix index
    # drafts first in a round, a draft model after it.
    suffix_accepted: int
    model_accepted: int
    acceptance_rate: float | None
    alpha: float | None
    rounds: int
    tokens_per_round: float | None
    per_position_acceptance: list[float | None]
    per_position_conditional: list[float | None]
    mean_gamma: float | None
    gamma_histogram: dict[int, int]
    plain_rounds: int
    ttft_s: float | None
    draft_prefill_s: float | None
    plain_step_s: float | None
    c_draft: float | None
    c_verify: float | None
    predicted_speedup: float | None
    predicted_speedup_iid: float | None
    identical_to_plain: bool | None
    mismatched_runs: int
    # The share of the rounds' wall time spent outside the draft and target passes.
    overhead_share: float | None = None
    # Rounds that verified a token tree, and the accepted tokens only its alternatives held.
    tree_rounds: int = 0
    tree_bonus: int = 0

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def _predict(
    rounds: Sequence[RoundRecord],
    alpha: float | None,
    c_draft: float | None,
    verify_cost: Mapping[int, float],
) -> tuple[float | None, float | None]:
    """The cost model's speedup E / cost, summed over the rounds the configuration actually ran.

    Fixed γ makes this exactly E(α, γ) / (γ·c_draft + c_verify). Rounds of other lengths (γ
    auto, or the last round cut short by the token budget) are priced at their own length, and a
    plain round inside a speculative run costs one unit and yields one token. Two variants: E
    from the per-position conditional acceptance among the rounds that drafted as many tokens
    (drops the independence assumption), and E from the single α with positions assumed
    independent. Pooled over every length, γ auto's rounds would read low: its confidence stop
    ends a draft where the draft turns unsure, so a long round's early positions would carry the
    short rounds' refusals (the hybrid at γ auto was predicted 0.86× where it measured 1.15×).
    """
    if not rounds:
        return None, None
    by_length: dict[int, list[RoundRecord]] = {}
    for r in rounds:
        if r.speculative:
            by_length.setdefault(r.drafted, []).append(r)
    conditional_at = {g: m.conditional_acceptance(group) for g, group in by_length.items()}
    cost = 0.0
    tokens_pos = 0.0
    tokens_iid = 0.0
    for r in rounds:
        # Draft passes are paid whether or not they proposed anything (the p_min stop); prompt
        # lookup runs none and is billed per proposed token (see measured.c_draft).
        drafting = (r.draft_steps or r.drafted) * (c_draft or 0.0)
        if not r.speculative:
            cost += 1.0 + drafting
            tokens_pos += 1.0
            tokens_iid += 1.0
            continue
        if c_draft is None or r.drafted not in verify_cost:
            return None, None
        cost += drafting + verify_cost[r.drafted]
        known = [a if a is not None else 0.0 for a in conditional_at[r.drafted][: r.drafted]]
        tokens_pos += expected_tokens_by_position(known)
        tokens_iid += expected_tokens(alpha or 0.0, r.drafted)
    if cost <= 0.0:
        return None, None
    return tokens_pos / cost, tokens_iid / cost


def _second_half(runs: Sequence[RunRecord]) -> tuple[int, float]:
    """Tokens and wall seconds of the rounds that start in the second half of each reply.

    Where γ auto ends up matters as much as the average over a reply that includes its
    learning: this is the rate after the first half of the tokens, when it has settled. The
    seconds are the rounds' whole wall time, as in tokens/s: the draft and target passes, the
    draft's catch-up after a pause and the round's overhead. Leaving the last two out would
    flatter a γ auto that pauses and resumes a draft model.
    """
    tokens = 0
    seconds = 0.0
    for run in runs:
        half = run.decoded_tokens / 2
        done = 0
        for r in run.rounds:
            if done >= half:
                tokens += r.emitted
                seconds += r.draft_s + r.verify_s + r.draft_catchup_s + r.overhead_s
            done += r.emitted
    return tokens, seconds


def figures_for(
    runs: Sequence[RunRecord],
    plain_runs: Sequence[RunRecord],
    *,
    greedy: bool,
    is_plain: bool = False,
) -> Figures:
    """Fold the runs of one configuration; plain_runs are plain decoding on the same prompts.
    is_plain: these are plain_runs, so nothing is compared (identical_to_plain is None)."""
    tokens = sum(r.decoded_tokens for r in runs)
    seconds = math.fsum(r.generation_s for r in runs)
    plain_tokens = sum(r.decoded_tokens for r in plain_runs)
    plain_seconds = math.fsum(r.generation_s for r in plain_runs)
    tps = _rate(tokens, seconds)
    plain_tps = _rate(plain_tokens, plain_seconds)
    speedup = tps / plain_tps if tps is not None and plain_tps else None

    tail_tps = _rate(*_second_half(runs))
    plain_tail_tps = _rate(*_second_half(plain_runs))
    speedup_tail = tail_tps / plain_tail_tps if tail_tps is not None and plain_tail_tps else None

    # Paired speedups, one per (prompt, repeat) block: their spread shows how noisy the machine
    # was, which a single aggregate figure hides.
    plain_by_key = {(p.phase, p.prompt, p.repeat): p for p in plain_runs}
    paired: list[float] = []
    by_prompt: dict[tuple[int, int], list[float]] = {}
    mismatched = 0
    for run in runs:
        twin = plain_by_key.get((run.phase, run.prompt, run.repeat))
        if twin is None:
            continue
        if run.token_ids != twin.token_ids:
            mismatched += 1
        run_tps = m.decode_rate(run.generated_tokens, run.generation_s)
        twin_tps = m.decode_rate(twin.generated_tokens, twin.generation_s)
        if run_tps is not None and twin_tps:
            paired.append(run_tps / twin_tps)
            by_prompt.setdefault((run.phase, run.prompt), []).append(paired[-1])
    # Between prompts the spread is the workload's (a question asked again drafts ten times as
    # fast as a new one); between repeats of one prompt, the machine's.
    repeat_spread = max((max(v) / min(v) for v in by_prompt.values() if len(v) > 1), default=None)

    rounds = [r for run in runs for r in run.rounds]
    spec_rounds = [r for r in rounds if r.speculative]
    drafted = sum(r.drafted for r in rounds)
    accepted = sum(r.accepted for r in rounds)
    suffix_accepted = sum(r.accepted_from_suffix for r in rounds)
    conditional = m.conditional_acceptance(rounds)
    alpha = m.judged_acceptance(rounds)

    unit = m.plain_step_s([r for run in plain_runs for r in run.rounds])
    c_draft = m.c_draft(rounds, unit)
    c_verify = m.c_verify(rounds, unit)
    verify_cost = m.verify_cost_by_length(rounds, unit) if unit else {}
    predicted, predicted_iid = (None, None)
    if spec_rounds:
        predicted, predicted_iid = _predict(rounds, alpha, c_draft, verify_cost)

    ttfts = [r.ttft_s for r in runs if r.ttft_s is not None]
    identical: bool | None = None
    if greedy and plain_by_key and not is_plain:
        identical = mismatched == 0
    return Figures(
        runs=len(runs),
        generated_tokens=sum(r.generated_tokens for r in runs),
        generation_s=seconds,
        tokens_per_second=tps,
        speedup=speedup,
        speedup_min=min(paired) if paired else None,
        speedup_max=max(paired) if paired else None,
        speedup_median=statistics.median(paired) if paired else None,
        speedup_repeat_spread=repeat_spread,
        speedup_second_half=speedup_tail,
        drafted=drafted,
        accepted=accepted,
        suffix_accepted=suffix_accepted,
        model_accepted=accepted - suffix_accepted,
        acceptance_rate=ratio(accepted, drafted),
        alpha=alpha,
        rounds=len(rounds),
        tokens_per_round=m.tokens_per_round(rounds),
        per_position_acceptance=per_position_acceptance(rounds),
        per_position_conditional=conditional,
        mean_gamma=m.mean_gamma(rounds) if spec_rounds else None,
        gamma_histogram=m.gamma_histogram(rounds),
        plain_rounds=len(rounds) - len(spec_rounds),
        ttft_s=m.mean(ttfts),
        draft_prefill_s=m.mean([r.draft_prefill_s for r in runs]),
        plain_step_s=unit,
        c_draft=c_draft,
        c_verify=c_verify,
        predicted_speedup=predicted,
        predicted_speedup_iid=predicted_iid,
        identical_to_plain=identical,
        mismatched_runs=mismatched,
        overhead_share=_overhead_share(rounds),
        tree_rounds=sum(1 for r in rounds if r.tree_nodes),
        tree_bonus=sum(r.tree_bonus for r in rounds),
    )


def _rate(tokens: int, seconds: float) -> float | None:
    """Tokens per second, None where undefined: no time, or no token to time (replies of one
    token each decode none after the first); never 0 (app/metrics/summary.py)."""
    return ratio(tokens, seconds) if tokens > 0 else None


def _overhead_share(rounds: Sequence[RoundRecord]) -> float | None:
    """Of the rounds' wall time, the share outside draft passes, target passes and catch-up."""
    overhead = math.fsum(r.overhead_s for r in rounds)
    passes = math.fsum(r.draft_s + r.verify_s + r.draft_catchup_s for r in rounds)
    return ratio(overhead, overhead + passes)

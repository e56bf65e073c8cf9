"""Seed 000's cost model of speculative decoding, as pure functions.

Every cost is in units of one plain target pass, which is also the cost of one token under plain
decoding; so a speedup is tokens per unit of cost, and "1.0" means "as fast as plain decoding".
Acceptance α is the chance that a draft token survives verification, positions assumed
independent (the seed names that assumption as optimistic; `expected_tokens_by_position` drops it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# A verification pass may cost a fixed amount or, as measured on real hardware, grow with γ.
VerifyCost = float | Callable[[int], float]

# Below this distance from 1 the closed form divides two vanishing quantities; the series is exact.
_NEAR_ONE = 1e-12

DEFAULT_MAX_GAMMA = 32


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:  # also rejects NaN
        raise ValueError(f"acceptance must lie in [0, 1], got {alpha!r}")


def _check_gamma(gamma: int) -> None:
    if gamma < 0:
        raise ValueError(f"draft length must be >= 0, got {gamma!r}")


def _check_cost(name: str, value: float) -> None:
    if not value >= 0.0 or math.isinf(value):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def verify_cost_at(c_verify: VerifyCost, gamma: int) -> float:
    """The cost of verifying γ draft tokens (γ + 1 rows) under a fixed or γ-dependent model."""
    cost = c_verify(gamma) if callable(c_verify) else float(c_verify)
    if not cost > 0.0 or math.isinf(cost):
        raise ValueError(f"verify cost must be a finite number > 0, got {cost!r} at γ = {gamma}")
    return cost


def expected_tokens(alpha: float, gamma: int) -> float:
    """E(α, γ) = 1 + α + … + α^γ = (1 − α^(γ+1)) / (1 − α): tokens one round yields on average."""
    _check_alpha(alpha)
    _check_gamma(gamma)
    if gamma == 0 or alpha == 0.0:
        return 1.0
    if 1.0 - alpha < _NEAR_ONE:
        return math.fsum(alpha**i for i in range(gamma + 1))
    # expm1 keeps 1 − α^(γ+1) accurate when α is close to 1, where the naive form cancels.
    return -math.expm1((gamma + 1) * math.log(alpha)) / (1.0 - alpha)


def expected_tokens_by_position(acceptances: Sequence[float]) -> float:
    """1 + a1 + a1·a2 + …, where a_i is the chance position i survives given i − 1 did."""
    return expected_tokens_by_length(acceptances)[-1]


def expected_tokens_by_length(acceptances: Sequence[float]) -> list[float]:
    """expected_tokens_by_position for every draft length at once: element γ is the expected
    tokens of a round drafting γ tokens (element 0 is plain decoding's 1)."""
    totals = [1.0]
    reach = 1.0
    for a in acceptances:
        _check_alpha(a)
        reach *= a
        totals.append(totals[-1] + reach)
    return totals


def round_cost(gamma: int, c_draft: float, c_verify: VerifyCost = 1.0) -> float:
    """γ · c_draft + c_verify: draft passes are paid whether or not their tokens survive."""
    _check_gamma(gamma)
    _check_cost("c_draft", c_draft)
    return gamma * c_draft + verify_cost_at(c_verify, gamma)


def speedup(alpha: float, gamma: int, c_draft: float, c_verify: VerifyCost = 1.0) -> float:
    """E / round cost: tokens per plain target pass's worth of work."""
    return expected_tokens(alpha, gamma) / round_cost(gamma, c_draft, c_verify)


def passes_per_token(alpha: float, gamma: int, c_draft: float, c_verify: VerifyCost = 1.0) -> float:
    """Round cost / E: what one token costs, in plain target passes (plain decoding pays 1)."""
    return round_cost(gamma, c_draft, c_verify) / expected_tokens(alpha, gamma)


def ceiling_fraction(alpha: float, gamma: int) -> float:
    """E / (γ + 1): the share of the tokens a round could yield that it yields on average."""
    return expected_tokens(alpha, gamma) / (gamma + 1)


@dataclass(frozen=True, slots=True)
class GammaChoice:
    """The best draft length of a sweep over γ = 0..max_gamma.

    curve[γ] is the speedup at γ. gamma == 0 means no draft length pays: do not speculate.
    peak_beyond_sweep is set when the best γ is the sweep's last, because the curve may still be
    rising there (a free draft makes it rise forever), so the reported peak is a limit of the
    sweep rather than of the models.
    """

    gamma: int
    speedup: float
    curve: tuple[float, ...]
    peak_beyond_sweep: bool
    message: str | None

    @property
    def speculate(self) -> bool:
        return self.gamma > 0


def best_gamma(
    alpha: float,
    c_draft: float,
    c_verify: VerifyCost = 1.0,
    max_gamma: int = DEFAULT_MAX_GAMMA,
) -> GammaChoice:
    """Sweep γ = 0..max_gamma and keep the fastest; ties go to the shorter draft (less work)."""
    _check_gamma(max_gamma)
    curve = tuple(speedup(alpha, g, c_draft, c_verify) for g in range(max_gamma + 1))
    best = max(range(len(curve)), key=lambda g: (curve[g], -g))
    beyond = max_gamma > 0 and best == max_gamma
    message: str | None = None
    if beyond:
        message = (
            f"best γ is the sweep's last ({max_gamma}, {curve[best]:.2f}×): "
            "the true peak may lie beyond the sweep"
        )
    elif best == 0:
        message = "no draft length pays here: do not speculate"
    return GammaChoice(best, curve[best], curve, beyond, message)


@dataclass(frozen=True, slots=True)
class RoundRow:
    """One round of a round table; the cumulative_* columns run up to and including it."""

    index: int
    drafted: int
    accepted: int
    rejected_at: int | None
    tokens: int
    cumulative_tokens: int
    cumulative_draft_passes: int
    cumulative_target_passes: int
    cumulative_cost: float


@dataclass(frozen=True, slots=True)
class RoundTable:
    """Rounds and their totals. acceptance is accepted / read flags (None when none were read).

    A flag is read when the target judged that position: every accepted one plus the first
    rejection. Positions after a rejection are never judged, so for measured rounds this is the
    cost model's α estimate, not metrics' acceptance_rate (accepted / drafted), which is lower.

    unused_flags counts trailing flags of an acceptance string that end before a round could:
    fewer than γ of them and no rejection, so whether a bonus token follows is unknown.
    """

    rows: tuple[RoundRow, ...]
    rounds: int
    tokens: int
    target_passes: int
    draft_passes: int
    cost: float
    tokens_per_round: float | None
    speedup: float | None
    accepted_flags: int
    read_flags: int
    acceptance: float | None
    unused_flags: int = 0


def _table(
    rounds: Sequence[tuple[int, int]], c_draft: float, c_verify: VerifyCost, unused: int
) -> RoundTable:
    _check_cost("c_draft", c_draft)
    rows: list[RoundRow] = []
    tokens = draft_passes = accepted_flags = read_flags = 0
    cost = 0.0
    for index, (drafted, accepted) in enumerate(rounds, start=1):
        if not 0 <= accepted <= drafted:
            raise ValueError(f"round {index}: accepted {accepted} outside 0..{drafted}")
        rejected_at = accepted + 1 if accepted < drafted else None
        yielded = accepted + 1
        tokens += yielded
        draft_passes += drafted
        accepted_flags += accepted
        read_flags += accepted + (1 if rejected_at is not None else 0)
        cost += round_cost(drafted, c_draft, c_verify)
        rows.append(
            RoundRow(
                index, drafted, accepted, rejected_at, yielded, tokens, draft_passes, index, cost
            )
        )
    n = len(rows)
    return RoundTable(
        rows=tuple(rows),
        rounds=n,
        tokens=tokens,
        target_passes=n,
        draft_passes=draft_passes,
        cost=cost,
        tokens_per_round=tokens / n if n else None,
        speedup=tokens / cost if cost else None,
        accepted_flags=accepted_flags,
        read_flags=read_flags,
        acceptance=accepted_flags / read_flags if read_flags else None,
        unused_flags=unused,
    )


def parse_acceptance_string(flags: str, gamma: int) -> tuple[list[tuple[int, int]], int]:
    """Split a 1/0 string into (drafted, accepted) rounds of γ flags at most, each stopping at the
    first 0; returns the rounds and the number of trailing flags that complete no round."""
    if gamma < 1:
        raise ValueError(f"a round table needs γ >= 1, got {gamma!r}")
    bad = set(flags) - {"0", "1"}
    if bad:
        raise ValueError(f"acceptance string may hold only 1 and 0, found {sorted(bad)!r}")
    rounds: list[tuple[int, int]] = []
    pos = 0
    while pos < len(flags):
        chunk = flags[pos : pos + gamma]
        zero = chunk.find("0")
        if zero >= 0:
            rounds.append((gamma, zero))
            pos += zero + 1
        elif len(chunk) == gamma:
            rounds.append((gamma, gamma))
            pos += gamma
        else:
            return rounds, len(chunk)
    return rounds, 0


def round_table(
    acceptance_string: str, gamma: int, c_draft: float, c_verify: VerifyCost = 1.0
) -> RoundTable:
    """The seed's round-by-round ledger for a written-out acceptance string (no randomness)."""
    rounds, unused = parse_acceptance_string(acceptance_string, gamma)
    return _table(rounds, c_draft, c_verify, unused)


def round_table_from_records(
    records: Sequence[tuple[int, int]], c_draft: float, c_verify: VerifyCost = 1.0
) -> RoundTable:
    """The same ledger for measured rounds, given as (drafted, accepted) pairs.

    Each round's verify cost is taken at its own drafted count, so a measured γ-dependent verify
    model prices short and long rounds differently.
    """
    return _table(list(records), c_draft, c_verify, 0)

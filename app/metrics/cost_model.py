"""The cost model of speculative decoding, as pure functions.

Every cost is in units of one plain target pass, which is also the cost of one token under plain
decoding; so a speedup is tokens per unit of cost, and "1.0" means "as fast as plain decoding".
Acceptance α is the chance that a draft token survives verification, positions assumed
independent (an optimistic assumption; `expected_tokens_by_position` drops it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# A verification pass may cost a fixed amount or, as measured on real hardware, grow with γ.
VerifyCost = float | Callable[[int], float]

# Below this distance from 1 the closed form divides two vanishing quantities; the series is exact.
_NEAR_ONE = 1e-12

# The γ ceiling: the longest draft a setting may ask for, the last γ γ auto considers (but see
# MAX_STOPPED_GAMMA) and where every sweep of the cost model stops. Verification batches stay
# small (γ + 1 rows), and on the hardware this runs on no fixed length past it has paid (the
# demo pair at γ 16 ran 0.99x its γ 12 over 64-token replies).
MAX_GAMMA = 16
# γ auto's ceiling for a draft that its confidence stop ends (app/engine/confidence.py): there
# the stop, not the ceiling, decides where a draft ends, and of the demo draft's rounds that
# reached 16 under the stop, 53 of 70 were kept whole.
MAX_STOPPED_GAMMA = 24
# Tokens that cost no draft pass (the suffix index's) may run further in one verification when
# they are near-certain: on the demo target 65 rows verify in 10.5 plain steps, 6.2 tokens a
# step against 17 rows' 4.3 when all are kept (an answer given again word for word).
MAX_FREE_DRAFT = 64


def free_draft_limit(n_batch: int | None) -> int:
    """The longest free draft a target verifies in one pass: a verification is one batch
    (LlamaModel.feed returns the logits of its last batch only); never below MAX_GAMMA."""
    if n_batch is None:
        return MAX_FREE_DRAFT
    return max(MAX_GAMMA, min(MAX_FREE_DRAFT, n_batch - 1))


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
class VerifyLine:
    """Verify cost as intercept + per_row · rows, rows = γ + 1 (a plain step is one row)."""

    intercept: float
    per_row: float

    def __call__(self, gamma: int) -> float:
        # A pass never costs less than nothing; a fit from noisy points could say so at γ = 0.
        return max(self.intercept + self.per_row * (gamma + 1), 1e-6)


def fit_verify_line(points: Iterable[tuple[float, float, float]]) -> VerifyLine | None:
    """Weighted least squares through (rows, cost, weight) points; None without two row counts.

    Checking more rows never makes a pass faster, so a negative slope is noise and is clamped
    to zero (the intercept then passes through the weighted mean).
    """
    pts = [(x, y, w) for x, y, w in points if w > 0.0]
    total = math.fsum(w for _, _, w in pts)
    if total <= 0.0:
        return None
    x_bar = math.fsum(w * x for x, _, w in pts) / total
    y_bar = math.fsum(w * y for _, y, w in pts) / total
    sxx = math.fsum(w * (x - x_bar) ** 2 for x, _, w in pts)
    if sxx <= 0.0:
        return None
    slope = math.fsum(w * (x - x_bar) * (y - y_bar) for x, y, w in pts) / sxx
    slope = max(slope, 0.0)
    return VerifyLine(y_bar - slope * x_bar, slope)


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
    max_gamma: int = MAX_GAMMA,
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

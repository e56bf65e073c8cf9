"""Seed 000's cost model fed by a reply's real rounds: the figures behind the Insight panel.

From the RoundRecords of one reply (live or finished) this derives the measured inputs of the
cost model (per-position acceptance, c_draft, a verify cost that grows with the rows checked),
the predicted speedup for every γ, the best γ, and the speedup actually measured at each γ that
ran. Pure functions, no Qt, so the arithmetic is tested without a window.

Units: every cost is in plain target steps (seed 000), the plain step being the engine's measured
`plain_step_s` when given, else the mean of the reply's own plain rounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.engine.events import RoundRecord
from app.metrics.cost_model import expected_tokens_by_position, round_cost
from app.metrics.summary import ratio

DEFAULT_MAX_GAMMA = 16


@dataclass(frozen=True, slots=True)
class VerifyLine:
    """Verify cost in plain steps as intercept + per_row · rows, rows = γ + 1."""

    intercept: float
    per_row: float

    def __call__(self, gamma: int) -> float:
        # A pass never costs less than nothing; a fit from noisy points could say so at γ = 0.
        return max(self.intercept + self.per_row * (gamma + 1), 1e-6)


@dataclass(frozen=True, slots=True)
class RoundRow:
    """One line of the round table, cumulative columns up to and including this round."""

    index: int
    gamma: int
    drafted: int
    accepted: int
    rejected_at: int | None
    tokens: int
    cumulative_tokens: int
    cumulative_draft_passes: int
    cumulative_target_passes: int
    cost: float | None
    cumulative_cost: float | None
    draft_ms: float
    verify_ms: float


@dataclass(frozen=True, slots=True)
class Insight:
    rounds: int
    spec_rounds: int
    plain_step_s: float | None
    alpha: float | None
    conditional: tuple[float | None, ...]
    c_draft: float | None
    verify: VerifyLine | None
    current_gamma: int | None
    curve: tuple[float, ...]
    best_gamma: int | None
    best_speedup: float | None
    measured: dict[int, float]
    measured_overall: float | None
    table: tuple[RoundRow, ...]

    @property
    def c_verify(self) -> float | None:
        """Verify cost at the current γ (what the what-if sliders start from)."""
        if self.verify is None or self.current_gamma is None:
            return None
        return self.verify(self.current_gamma)

    @property
    def predicted_at_current(self) -> float | None:
        if self.current_gamma is None or self.current_gamma >= len(self.curve):
            return None
        return self.curve[self.current_gamma]


def conditional_acceptance(rounds: Sequence[RoundRecord]) -> list[float | None]:
    """Acceptance of position i given 1..i-1 were kept; only judged positions are trials."""
    longest = max((r.drafted for r in rounds), default=0)
    judged = [0] * longest
    kept = [0] * longest
    for r in rounds:
        for i in range(min(r.accepted + 1, r.drafted)):
            judged[i] += 1
            kept[i] += 1 if i < r.accepted else 0
    return [ratio(k, j) for k, j in zip(kept, judged, strict=True)]


def _fit_verify(rounds: Sequence[RoundRecord], plain_step_s: float) -> VerifyLine | None:
    """Least squares over per-row-count mean verify times, anchored by the plain step (1 row)."""
    by_rows: dict[int, list[float]] = {1: [plain_step_s]}
    for r in rounds:
        if r.drafted > 0:
            by_rows.setdefault(r.drafted + 1, []).append(r.verify_s)
    if len(by_rows) < 2:
        return None
    points = [(float(n), math.fsum(v) / len(v) / plain_step_s) for n, v in by_rows.items()]
    x_bar = math.fsum(x for x, _ in points) / len(points)
    y_bar = math.fsum(y for _, y in points) / len(points)
    sxx = math.fsum((x - x_bar) ** 2 for x, _ in points)
    slope = math.fsum((x - x_bar) * (y - y_bar) for x, y in points) / sxx
    # Checking more rows never makes a pass faster: a negative slope is noise.
    slope = max(slope, 0.0)
    return VerifyLine(y_bar - slope * x_bar, slope)


def _table(
    rounds: Sequence[RoundRecord],
    c_draft: float | None,
    verify: VerifyLine | None,
) -> tuple[RoundRow, ...]:
    rows: list[RoundRow] = []
    tokens = draft_passes = 0
    cumulative: float | None = 0.0
    for n, r in enumerate(rounds, start=1):
        tokens += r.emitted
        draft_passes += r.draft_steps
        cost: float | None = None
        if r.drafted == 0:
            cost = 1.0  # a plain step is the unit
        elif c_draft is not None and verify is not None:
            cost = round_cost(r.drafted, c_draft, verify)
        cumulative = cumulative + cost if cumulative is not None and cost is not None else None
        rows.append(
            RoundRow(
                index=n,
                gamma=r.gamma,
                drafted=r.drafted,
                accepted=r.accepted,
                rejected_at=r.rejected_at,
                tokens=r.emitted,
                cumulative_tokens=tokens,
                cumulative_draft_passes=draft_passes,
                cumulative_target_passes=n,
                cost=cost,
                cumulative_cost=cumulative,
                draft_ms=r.draft_s * 1000.0,
                verify_ms=r.verify_s * 1000.0,
            )
        )
    return tuple(rows)


def analyse(
    rounds: Sequence[RoundRecord],
    plain_step_s: float | None = None,
    *,
    max_gamma: int = DEFAULT_MAX_GAMMA,
) -> Insight:
    """Everything the Insight panel shows about one reply's rounds."""
    spec = [r for r in rounds if r.drafted > 0]
    plain = [r.verify_s for r in rounds if r.drafted == 0]
    if not plain_step_s and plain:
        plain_step_s = math.fsum(plain) / len(plain)
    accepted = sum(r.accepted for r in spec)
    judged = accepted + sum(1 for r in spec if r.accepted < r.drafted)
    alpha = ratio(accepted, judged)
    conditional = conditional_acceptance(spec)
    current = spec[-1].gamma if spec else None

    c_draft: float | None = None
    verify: VerifyLine | None = None
    measured: dict[int, float] = {}
    measured_overall: float | None = None
    if plain_step_s:
        steps = sum(r.draft_steps for r in spec)
        if steps:
            c_draft = math.fsum(r.draft_s for r in spec) / steps / plain_step_s
        elif spec:
            c_draft = 0.0  # prompt lookup: no forward passes to pay for
        verify = _fit_verify(spec, plain_step_s)
        by_gamma: dict[int, list[RoundRecord]] = {}
        for r in spec:
            by_gamma.setdefault(r.drafted, []).append(r)
        for gamma, group in sorted(by_gamma.items()):
            seconds = math.fsum(r.draft_s + r.verify_s for r in group)
            if seconds > 0:
                measured[gamma] = sum(r.emitted for r in group) / seconds * plain_step_s
        seconds = math.fsum(r.draft_s + r.verify_s for r in rounds)
        if seconds > 0 and rounds:
            measured_overall = sum(r.emitted for r in rounds) / seconds * plain_step_s

    curve: tuple[float, ...] = ()
    best: int | None = None
    best_speedup: float | None = None
    if alpha is not None and c_draft is not None and verify is not None:
        # Positions never judged take the pooled α: the best guess the data allows.
        per_position = [alpha if a is None else a for a in conditional]
        per_position += [alpha] * max(0, max_gamma - len(per_position))
        values = [1.0]  # γ = 0 is plain decoding, the unit
        for gamma in range(1, max_gamma + 1):
            tokens = expected_tokens_by_position(per_position[:gamma])
            values.append(tokens / round_cost(gamma, c_draft, verify))
        curve = tuple(values)
        best = max(range(len(curve)), key=lambda g: (curve[g], -g))
        best_speedup = curve[best]
    return Insight(
        rounds=len(rounds),
        spec_rounds=len(spec),
        plain_step_s=plain_step_s,
        alpha=alpha,
        conditional=tuple(conditional),
        c_draft=c_draft,
        verify=verify,
        current_gamma=current,
        curve=curve,
        best_gamma=best,
        best_speedup=best_speedup,
        measured=measured,
        measured_overall=measured_overall,
        table=_table(rounds, c_draft, verify),
    )

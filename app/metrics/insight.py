"""The cost model fed by a reply's real rounds: the figures behind the Insight panel.

From the RoundRecords of one reply (live or finished) this derives the measured inputs of the
cost model (per-position acceptance, c_draft, a verify cost that grows with the rows checked),
the predicted speedup for every γ, the best γ, and the speedup actually measured at each γ that
ran. Pure functions, no Qt, so the arithmetic is tested without a window.

Units: every cost is in plain target steps, the plain step being the engine's measured
`plain_step_s` when given, else the mean of the reply's own plain rounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.metrics import measured as m
from app.metrics.cost_model import (
    MAX_GAMMA,
    MAX_STOPPED_GAMMA,
    VerifyLine,
    expected_tokens_by_position,
    round_cost,
)
from app.metrics.ledger import LedgerRow, ledger
from app.metrics.rounds import RoundRecord


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
    table: tuple[LedgerRow, ...]

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


def _measured_speedups(
    rounds: Sequence[RoundRecord], unit: float
) -> tuple[dict[int, float], float | None]:
    """Tokens per plain step's worth of round time, at each draft length and overall."""
    by_gamma: dict[int, list[RoundRecord]] = {}
    for r in rounds:
        if r.speculative:
            by_gamma.setdefault(r.drafted, []).append(r)
    measured: dict[int, float] = {}
    for gamma, group in sorted(by_gamma.items()):
        seconds = math.fsum(r.draft_s + r.verify_s for r in group)
        if seconds > 0:
            measured[gamma] = sum(r.emitted for r in group) / seconds * unit
    if not by_gamma:  # a plain reply: nothing to measure against plain decoding
        return measured, None
    seconds = math.fsum(r.draft_s + r.verify_s for r in rounds)
    overall = sum(r.emitted for r in rounds) / seconds * unit if seconds > 0 else None
    return measured, overall


def analyse(
    rounds: Sequence[RoundRecord],
    plain_step_s: float | None = None,
    *,
    max_gamma: int = MAX_GAMMA,
) -> Insight:
    """Everything the Insight panel shows about one reply's rounds. The curve reaches
    max_gamma, or further where γ auto asked for more (up to MAX_STOPPED_GAMMA, as its
    confidence stop lets it), so the γ it ran at has a prediction too."""
    spec = [r for r in rounds if r.speculative]
    asked = max((r.gamma for r in spec), default=0)
    max_gamma = max(max_gamma, min(asked, MAX_STOPPED_GAMMA))
    if not plain_step_s:
        plain_step_s = m.plain_step_s(rounds)
    alpha = m.judged_acceptance(spec)
    conditional = m.conditional_acceptance(spec)
    current = spec[-1].gamma if spec else None

    c_draft: float | None = None
    verify: VerifyLine | None = None
    measured: dict[int, float] = {}
    measured_overall: float | None = None
    if plain_step_s:
        c_draft = m.c_draft(rounds, plain_step_s)
        verify = m.fit_verify(spec, plain_step_s)
        measured, measured_overall = _measured_speedups(rounds, plain_step_s)

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
        table=ledger(rounds, c_draft, verify),
    )

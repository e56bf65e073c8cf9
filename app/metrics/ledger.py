"""The round ledger: one line per round with its cost and the running totals.

`RoundRecord` is what the engine measured in a round; a `LedgerRow` is that round read through
the cost model (its cost in plain steps, cumulative tokens and passes). The Insight panel's
round table shows these rows, and the cost model's worked examples are ledgers too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.metrics.cost_model import VerifyCost, round_cost
from app.metrics.rounds import RoundRecord


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One round; the cumulative_* columns run up to and including it.

    cost is in plain steps (a plain step costs 1), None while the draft's costs are unknown.
    """

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


def ledger(
    rounds: Iterable[RoundRecord], c_draft: float | None, c_verify: VerifyCost | None
) -> tuple[LedgerRow, ...]:
    """The ledger of `rounds`, each speculative round priced at γ · c_draft + c_verify(γ)."""
    rows: list[LedgerRow] = []
    tokens = draft_passes = 0
    cumulative: float | None = 0.0
    for n, r in enumerate(rounds, start=1):
        tokens += r.emitted
        draft_passes += r.draft_steps
        cost: float | None = None
        if not r.speculative:
            cost = 1.0  # a plain step is the unit
        elif c_draft is not None and c_verify is not None:
            cost = round_cost(r.drafted, c_draft, c_verify)
        cumulative = cumulative + cost if cumulative is not None and cost is not None else None
        rows.append(
            LedgerRow(
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

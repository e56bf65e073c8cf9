"""The cost model's worked round table, as a test oracle: an acceptance string (1 kept, 0
refused) read into rounds, priced by the app's own ledger (app/metrics/ledger.py), with the
totals the worked example quotes (20 tokens, cost 8.40, 2.38×, 14/18 flags)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.metrics.cost_model import VerifyCost
from app.metrics.ledger import LedgerRow, ledger
from app.metrics.measured import judged_positions
from app.metrics.rounds import RoundRecord


@dataclass(frozen=True, slots=True)
class RoundTable:
    """Rounds and their totals. acceptance is accepted / read flags (None when none were read).

    A flag is read when the target judged that position: every accepted one plus the first
    rejection. unused_flags counts trailing flags that end before a round could: fewer than γ
    of them and no rejection, so whether a bonus token follows is unknown.
    """

    rows: tuple[LedgerRow, ...]
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


def _record(index: int, drafted: int, accepted: int) -> RoundRecord:
    if not 0 <= accepted <= drafted:
        raise ValueError(f"round {index + 1}: accepted {accepted} outside 0..{drafted}")
    return RoundRecord(
        index=index,
        mode="draft" if drafted else "plain",
        gamma=drafted,
        drafted=drafted,
        accepted=accepted,
        emitted=accepted + 1,
        draft_s=0.0,
        verify_s=0.0,
        draft_steps=drafted,
    )


def round_table_from_records(
    records: Sequence[tuple[int, int]], c_draft: float, c_verify: VerifyCost = 1.0
) -> RoundTable:
    """The ledger of (drafted, accepted) rounds, each verify priced at its own length."""
    rounds = [_record(i, d, a) for i, (d, a) in enumerate(records)]
    return _totals(ledger(rounds, c_draft, c_verify), rounds, unused=0)


def round_table(
    acceptance_string: str, gamma: int, c_draft: float, c_verify: VerifyCost = 1.0
) -> RoundTable:
    """The worked round table of an acceptance string read in rounds of γ."""
    rounds, unused = parse_acceptance_string(acceptance_string, gamma)
    return replace(round_table_from_records(rounds, c_draft, c_verify), unused_flags=unused)


def _totals(
    rows: tuple[LedgerRow, ...], rounds: Sequence[RoundRecord], *, unused: int
) -> RoundTable:
    n = len(rows)
    tokens = rows[-1].cumulative_tokens if rows else 0
    cost = (rows[-1].cumulative_cost or 0.0) if rows else 0.0
    accepted = sum(r.accepted for r in rounds)
    read = sum(judged_positions(r.drafted, r.accepted) for r in rounds)
    return RoundTable(
        rows=rows,
        rounds=n,
        tokens=tokens,
        target_passes=n,
        draft_passes=rows[-1].cumulative_draft_passes if rows else 0,
        cost=cost,
        tokens_per_round=tokens / n if n else None,
        speedup=tokens / cost if cost else None,
        accepted_flags=accepted,
        read_flags=read,
        acceptance=accepted / read if read else None,
        unused_flags=unused,
    )

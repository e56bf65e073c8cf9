"""A chance given again to something left out turn after turn (a draft model the hybrid sets
aside round after round, or one γ auto leaves unread reply after reply): measured only when it
runs, it would otherwise stay out on one bad figure for good.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RetryBackoff:
    """Due after `first` turns out in a row; each retry doubles the wait, up to `last`, and a
    turn it wins on its own merits brings the wait back to `first`."""

    first: int
    last: int
    out_in_a_row: int = 0
    wait: int = field(init=False)

    def __post_init__(self) -> None:
        self.wait = self.first

    @property
    def due(self) -> bool:
        return self.out_in_a_row >= self.wait

    def left_out(self) -> None:
        self.out_in_a_row += 1

    def ran(self) -> None:
        self.out_in_a_row = 0

    def won(self) -> None:
        self.wait = self.first

    def retried(self) -> None:
        self.wait = min(2 * self.wait, self.last)

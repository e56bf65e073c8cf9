"""The hybrid's draft model reading what it lacks of the conversation: how far behind it is (read
from its cache), the reading, and the speed readings run at, so a reading can be priced before
it is bought. Readings are timed apart from draft passes (app/engine/hybrid_drafter.py says why).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.engine.drafters import ModelDrafter
from app.engine.hybrid_rates import FADE

# Gaps shorter than this are read in about a pass's time, whatever their length: they would
# make the reading speed look slower than a long catch-up's.
MIN_TIMED_GAP = 16


@dataclass
class ReadingSpeed:
    """How fast the draft model reads a gap in one batch (its prefill rate), faded."""

    seconds: float = 0.0
    tokens: float = 0.0

    def add(self, seconds: float, tokens: int) -> None:
        self.seconds = self.seconds * FADE + seconds
        self.tokens = self.tokens * FADE + tokens

    @property
    def known(self) -> bool:
        return self.tokens > 0.0

    def seconds_for(self, tokens: float) -> float:
        """Seconds to read `tokens` at the measured speed (known only)."""
        return tokens * self.seconds / self.tokens


class GapReader:
    """Has the draft model read the tokens it lacks, and times the readings."""

    def __init__(self, drafter: ModelDrafter, clock: Callable[[], float]) -> None:
        self._drafter = drafter
        self._clock = clock
        self.speed = ReadingSpeed()

    def behind(self, history: Sequence[int]) -> int:
        """How many of `history`'s tokens the draft model's cache lacks, read from the cache
        itself (a reset elsewhere, a new conversation): its kept draft tokens are there
        already, and counted as a gap they would make every reading look dearer than it is."""
        return self._drafter.unread(history)

    def read(self, history: Sequence[int], behind: int) -> float:
        """Have the draft model read `history` (`behind` tokens it lacks); the seconds it took."""
        start = self._clock()
        self._drafter.prefill(history)
        seconds = self._clock() - start
        if behind >= MIN_TIMED_GAP:
            self.speed.add(seconds, behind)
        return seconds

    def read_part(self, history: Sequence[int], behind: int, part: int) -> tuple[int, float]:
        """Read the first `part` tokens of a gap of unknown reading speed to time it (the model
        keeps what it read): the tokens still behind, and the seconds it took."""
        start = len(history) - behind
        return behind - part, self.read(history[: start + part], part)

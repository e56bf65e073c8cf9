"""A draft model reading what it lacks of the conversation: how far behind it is (read from its
cache), the reading, the speed readings run at (so a reading is priced before it is bought) and
what a reading must save to be bought, for the hybrid and for γ auto's draft model alone.
Readings are timed apart from draft passes (app/engine/hybrid_drafter.py says why).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.engine.drafters import ModelDrafter
from app.engine.hybrid_rates import FADE

# Gaps shorter than this are read in about a pass's time, whatever their length: they would
# make the reading speed look slower than a long catch-up's.
MIN_TIMED_GAP = 16
# Gaps up to this long are a question or an instruction; longer ones are a text. The hybrid
# reads a short gap at once while the rate without the model is unknown, and has a long one
# wait for that rate. Waiting or not costs at most one reading either way (ski rental), so
# what decides is how likely the reply is new text, not the reading's price: a gap of up to 96
# tokens (about 70 words with the chat template's) is a question or an instruction, rarely a
# text to copy. At 64, an 85-token question (the bench's "sql") ran 15 plain steps, 0.38 s,
# before the 0.29 s reading the draft model alone does at once, and ran at 0.90× it. At 128,
# the bench's "rename" (code to return with a rename, a 127-token gap through `specchat serve`,
# whose draft model holds the chat template's start from the request before) had 0.5 s read
# first and ran at 29.5 tok/s against the suffix index's 41.6.
EAGER_READ = 96
# A long reading must save this many times its cost over the tokens the reply may still
# produce: it can end sooner (no end of text is foreseen), and a text is the prompt its reply
# may paraphrase rather than copy. In the bench's "rename", the hybrid read 200 tokens (0.54 s)
# at a break-even of 78 tokens left, and the reply ended 10 tokens later, at 37 tok/s against
# plain's 46; the draft model alone, after replies it had drafted whole, read a 428-token
# paragraph (1.4 s) that its reply then paraphrased, at 0.69x plain. Short gaps cost a few
# passes.
_LONG_READING_MARGIN = 1.5


def reading_to_earn(gap: int, seconds: float) -> float:
    """What a reading of `gap` tokens, taking `seconds`, must save to be worth buying."""
    return seconds * (_LONG_READING_MARGIN if gap > EAGER_READ else 1.0)


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

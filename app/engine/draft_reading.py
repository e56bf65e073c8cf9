"""The draft model reading what it lacks of the conversation: timed apart from drafting, and
under γ auto left unread for a reply that cannot pay for the reading (docs/design.md, γ auto).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from app.engine.drafters import Drafter, ModelDrafter
from app.engine.gap_reader import EAGER_READ
from app.engine.retry_backoff import RetryBackoff

if TYPE_CHECKING:
    from app.engine.adaptive import GammaController

# Tokens a paused draft model's probe reads at most (DraftRequest.read_limit): a question or an
# instruction whole (EAGER_READ), since a probe after part of one judges the part; a longer gap,
# a text, through a window of its end (PROBE_WINDOW in app/engine/drafters.py). A 55-token
# question read whole cost the demo's Q4_1 draft 190 ms against 110 for its last 32 tokens on
# the AMX machine, and a draft that resumes then reads nothing again: from the window it reads
# the whole conversation afresh.
PROBE_READ_LIMIT = EAGER_READ

# Replies left unread in a row before one that asks a question (its prompt no longer than
# EAGER_READ: a reading of a few passes) is read anyway: a rate that leaves every reply unread
# is never measured again. Doubled each time the reading does not win the draft model back, up
# to the last. A text is never read so: a 376-token prompt read for a 64-token reply ran 0.53x.
_FIRST_RETRY = 4
_LAST_RETRY = 64


class DraftReading:
    """Times the drafter's reads and judges, once per conversation, whether to skip one."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        # The prompt of the last reply whose prompt the draft model left unread.
        self._left_unread: list[int] | None = None
        self._retry = RetryBackoff(_FIRST_RETRY, _LAST_RETRY)

    def read(
        self, drafter: Drafter, tokens: list[int], controller: GammaController | None
    ) -> float:
        """Seconds the drafter took to read, in one batch, all but the last token.

        Timed apart from drafting (though inside the generation time, which it delays): the
        prompt is read once a reply, and tokens accepted while the draft sat idle are a one-off
        cost of having paused. Billed to the next draft steps, either would make the draft look
        too dear (γ auto's first estimate; whether a paused draft is worth resuming).
        """
        unread = drafter.unread(tokens[:-1]) if isinstance(drafter, ModelDrafter) else 0
        start = self._clock()
        drafter.prefill(tokens[:-1])
        seconds = self._clock() - start
        if controller is not None and unread:
            controller.note_read(unread, seconds)
        return seconds

    def leave_unread(
        self,
        drafter: Drafter | None,
        controller: GammaController | None,
        tokens: list[int],
        remaining: int,
    ) -> str | None:
        """Why γ auto leaves the text a draft model lacks unread this reply (a notice), or
        None when the model reads it.

        Once only per conversation: reading what a reply left unread is a cost paid once, and
        a conversation that goes on after such a reply has the replies to pay it back. And
        not every reply: the judgement prices drafting at the rate speculation delivered
        lately, which a reply left unread does not measure, so one slow reply (a summary
        drafted 24 tokens a round at depth 500, 0.57x plain) had left every later one
        unread, questions of 74 tokens included, where a fixed γ ran 1.1-1.2x plain.
        """
        if controller is None or not isinstance(drafter, ModelDrafter):
            return None
        left = self._left_unread
        if left is not None and tokens[: len(left)] == left:
            return None
        unread = drafter.unread(tokens[:-1])
        if controller.reading_pays(unread, remaining):
            self._retry.ran()
            self._retry.won()
            return None
        if self._retry.due and unread <= EAGER_READ:
            self._retry.ran()
            self._retry.retried()
            return None
        self._retry.left_out()
        self._left_unread = list(tokens)
        return (
            f"draft model off for this reply: reading the {unread} prompt tokens it lacks "
            f"would cost more than drafting saves on {remaining} tokens"
        )

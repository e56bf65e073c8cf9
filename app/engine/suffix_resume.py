"""Picking a copied text up again where the reply edits it.

A reply that copies a text with changes (a revision, a fix, code returned with an edit) leaves
the text for a token or a few and then goes on with it: a word dropped, one added, one replaced.
Right after the edit the history's end no longer occurs in the text, or only as a one-token
match anywhere in it, so the suffix index proposes nothing until two tokens of the text have
come back (plain steps), then a short, doubtful match, then the long one again: on the demo
target's "formal" revision three rounds for what one round copies. Where the text was being
followed a moment ago, the last token found a few places past where the reply left it is a
local anchor, far more telling than the same token anywhere: the text is proposed on from
there.

The window kept is what the last long match (`FOLLOWED_MATCH`) went on with in the index,
beyond its draft; it is picked up once: after that, the index's own matches take over.
The edit is looked for only within `_WITHIN` tokens of the break, the anchor within `_REACH`
tokens of it; anything further is a new text, left to the index's own matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Tokens of the matched text kept past where the reply stands: the anchor's reach and a draft.
WINDOW_TOKENS = 48
# A match this long says the reply was following a text. Replayed on the demo target's replies
# (scripts/suffix_replay.py), resumes after matches of 9-12 tokens kept 3 of 39 tokens drafted,
# after 2-3 tokens the anchor was a common word found by chance (" the", ","); after the bench's
# revisions and fixes, matches of 16-49 tokens, 6 to 16 of each 11-16-token resume were kept.
FOLLOWED_MATCH = 16
# The anchor may be this many tokens past the break (a dropped phrase of a few words).
_REACH = 8
# Tokens emitted since the break within which the text is still being picked up (a replaced or
# inserted word of up to three tokens, and the text's first token after it).
_WITHIN = 4


@dataclass(frozen=True, slots=True)
class CopyWindow:
    """What a match in the index went on with, from history position `start`."""

    start: int
    tokens: tuple[int, ...]
    match_length: int  # of the match the window came from: how far the text had been followed
    # A window already picked up once serves only the history it was picked up at: a resume
    # taken from a resume chained one-token anchors on (5, 1, 1, 0 tokens kept in a replay).
    picked_up: bool = False

    def resumed(self, history: Sequence[int]) -> tuple[int, ...]:
        """The window's tokens after the place where the history picks it up again (empty when
        it has left the window). The history must extend the one the window was taken at."""
        emitted = history[self.start :]
        if self.picked_up and emitted:
            return ()
        agreed = 0
        for mine, theirs in zip(self.tokens, emitted, strict=False):
            if mine != theirs:
                break
            agreed += 1
        if agreed == len(emitted):  # not left at all: the window simply goes on
            return self.tokens[agreed:]
        if len(emitted) - agreed > _WITHIN:
            return ()
        last = emitted[-1]
        for at in range(agreed, min(agreed + _REACH, len(self.tokens))):
            if self.tokens[at] == last:
                return self.tokens[at + 1 :]
        return ()

    def after(self, history_length: int, tokens: Sequence[int]) -> CopyWindow:
        """The window picked up again: `tokens` of it from `history_length` on."""
        return CopyWindow(history_length, tuple(tokens), self.match_length, picked_up=True)

"""Following a growing query through a SuffixIndex: where the drafter stands in the past chats."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.engine.suffix_index import ROOT, Match, SuffixIndex


class Cursor:
    """The longest suffix of a growing query that occurs in an index, kept up to date in O(1)
    amortised per query token. Any change to the index makes it stale (`fresh` turns False):
    states may have been split, so the owner re-feeds the query's tail."""

    def __init__(self, index: SuffixIndex) -> None:
        self.index = index
        self.reset()

    def reset(self) -> None:
        self._state = ROOT
        self._length = 0
        self._version = self.index.version

    @property
    def fresh(self) -> bool:
        return self._version == self.index.version

    @property
    def match(self) -> Match:
        return Match(self._state, self._length)

    def feed(self, tokens: Iterable[int]) -> None:
        index = self.index
        find, link, lengths = index._edge, index._link, index._len
        target = index._edge_target
        state, length = self._state, self._length
        for token in tokens:
            edge = find(state, token)
            while edge < 0 and state != ROOT:
                state = link[state]
                length = lengths[state]
                edge = find(state, token)
            if edge >= 0:
                state = target[edge]
                length += 1
            else:
                length = 0
        self._state, self._length = state, length


def longest_match(index: SuffixIndex, query: Sequence[int]) -> Match:
    """The longest suffix of `query` that occurs in the index, scanning the whole query."""
    cursor = Cursor(index)
    cursor.feed(query)
    return cursor.match

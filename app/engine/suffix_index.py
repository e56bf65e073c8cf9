"""A suffix automaton over token ids: where does the end of a text occur before, and what
followed it there, how often.

The automaton (Blumer et al.; built online as in Ukkonen-style constructions) holds every
substring of every document it was given, and only those: documents are added as a generalised
automaton, each starting from the root, so no match runs across the end of one document into the
next. Each state is a class of substrings with the same set of end positions; its `count` is the
size of that set, i.e. how many times its strings occur. For a matched suffix s in state u, the
next token t occurs `count[δ(u, t)]` times after s, so the most frequent continuation is a greedy
walk along the transition whose target has the largest count (ties: the most recent occurrence),
which is SuffixDecoding's frequency-scored candidate read off an automaton instead of a tree.

Costs. Adding a token is O(1) amortised for the automaton itself (at most 2 states and 3
transitions per token overall). Counts are kept online: a token adds one occurrence to every
state on its suffix-link path, one step per distinct class of its suffixes seen before; on
tokenized prose and code that path is 3.4 states on average (22 at most). Only a periodic run
(a token or phrase repeated many times, as a looping small model writes) has a long path, so the
walk stops at COUNT_DEPTH states: counts are exact unless a run repeats more than that, and then
only the run's own short states undercount it. Matching a query is O(1) amortised per query token
(`Cursor`); a lookup of k continuation tokens is O(k) on unbranched states, and the ranking of a
very branchy state is cached until one of its counts changes.

Memory. CPython objects per state would cost hundreds of bytes, so states and transitions live in
flat `array('i')` columns (4 bytes a field); a state's transitions are a linked chain of edges,
except for the few states with more than `HUB_DEGREE` distinct next tokens (the root, frequent
short contexts), whose edges are indexed by a dict. On tokenized prose and code that is 1.36
states and 2.09 edges per token, 86 bytes per token allocated: 26 MB for 300k tokens
(scripts/suffix_figures.py).

Not thread-safe: one thread adds and reads (the engine's, between and during replies).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

ROOT = 0
# The stored columns: six per state, then three per edge.
COLUMNS = (
    "len",
    "link",
    "count",
    "recent",
    "head",
    "degree",
    "edge_token",
    "edge_target",
    "edge_next",
)
# Occurrences a token adds along its suffix path, at most: only a periodic run (one token or
# phrase repeated over this many times) has a longer path, and there the deeper (shorter)
# states, whose continuation is the run itself, stop counting the run's further repeats.
COUNT_DEPTH = 256
# Past this many distinct next tokens a state's edges get a dict: a chain this short is scanned
# faster than a dict is built, and few states (about 1 in 100 on chat text) go past it.
HUB_DEGREE = 8


@dataclass(frozen=True, slots=True)
class Match:
    """Where the end of a query sits in the index: its longest suffix that occurs there."""

    state: int
    length: int  # tokens matched; 0 when not even the last token occurs


@dataclass(frozen=True, slots=True)
class Branch:
    """A continuation of a match and how often each of its prefixes followed it.

    counts[i] is the number of occurrences of the matched suffix followed by tokens[: i + 1],
    so counts never increase along a branch and counts[i] / support is its observed frequency."""

    tokens: tuple[int, ...]
    counts: tuple[int, ...]
    support: int  # occurrences of the matched suffix followed by any token

    @property
    def count(self) -> int:
        return self.counts[0] if self.counts else 0


class SuffixIndex:
    """Documents of token ids; the last one may be open and grow a token at a time."""

    def __init__(self) -> None:
        # State columns. recent: the global position of a state's latest occurrence.
        self._len = array("i", [0])
        self._link = array("i", [-1])
        self._count = array("i", [0])
        self._recent = array("i", [-1])
        # First edge of the state's chain (-1: none); edges are prepended, so a chain runs from
        # newer to older edges and `_edge_next[e] < e` always.
        self._head = array("i", [-1])
        self._degree = array("B", [0])  # edges of the state, saturating past HUB_DEGREE
        # Edge columns.
        self._edge_token = array("i")
        self._edge_target = array("i")
        self._edge_next = array("i")
        self._hubs = _Hubs(self)  # state -> token -> edge, for branchy states
        # Hub rankings: state -> (its count, tokens indexed then, edges ranked, support).
        self._ranked: dict[int, tuple[int, int, list[int], int]] = {}
        self._last = ROOT  # state of the open document's tokens so far
        self._open_length = 0
        self.tokens = 0  # tokens indexed, over all documents
        self.documents = 0
        self.version = 0  # bumped by every change: cursors and caches from before are stale

    # -- building -----------------------------------------------------------------------------

    def add_document(self, tokens: Iterable[int]) -> None:
        """Index a whole document; the next tokens start another."""
        self.extend(tokens)
        self.end_document()

    def extend(self, tokens: Iterable[int]) -> None:
        """Append tokens to the open document (starting one if none is open)."""
        for token in tokens:
            self._append(token)
        self.version += 1

    def end_document(self) -> None:
        self._last = ROOT
        self._open_length = 0

    def _append(self, token: int) -> None:
        lengths, link, target = self._len, self._link, self._edge_target
        degree, head, edge_token, edge_next = (
            self._degree,
            self._head,
            self._edge_token,
            self._edge_next,
        )
        last = self._last
        if self._open_length == 0:
            self.documents += 1
        edge = self._edge(last, token)
        if edge >= 0:
            # The open document's text so far already occurs in another document.
            q = target[edge]
            state = q if lengths[q] == lengths[last] + 1 else self._split(last, q, token)
        else:
            state = len(lengths)
            lengths.append(lengths[last] + 1)
            link.append(ROOT)
            self._count.append(0)
            self._recent.append(-1)
            head.append(-1)
            degree.append(0)
            p = last
            while p >= 0:
                # The edge lookup, inlined: this loop is most of the build time.
                if degree[p] > HUB_DEGREE:
                    edge = self._hubs[p].get(token, -1)
                else:
                    edge = head[p]
                    while edge >= 0 and edge_token[edge] != token:
                        edge = edge_next[edge]
                if edge >= 0:
                    break
                self._add_edge(p, token, state)
                p = link[p]
            if p >= 0:
                q = target[edge]
                link[state] = q if lengths[p] + 1 == lengths[q] else self._split(p, q, token)
        # Every suffix of the new prefix occurs once more, ending here.
        count, recent, position = self._count, self._recent, self.tokens
        v, depth = state, COUNT_DEPTH
        while v > ROOT and depth:
            count[v] += 1
            recent[v] = position
            v = link[v]
            depth -= 1
        self._last = state
        self._open_length += 1
        self.tokens += 1

    def _split(self, p: int, q: int, token: int) -> int:
        """Clone q for the strings up to len(p) + 1 and send p's suffix path's edges to it."""
        clone = len(self._len)
        self._len.append(self._len[p] + 1)
        self._link.append(self._link[q])
        self._count.append(self._count[q])
        self._recent.append(self._recent[q])
        self._head.append(-1)
        self._degree.append(0)
        edge = self._head[q]
        while edge >= 0:
            self._add_edge(clone, self._edge_token[edge], self._edge_target[edge])
            edge = self._edge_next[edge]
        link, target = self._link, self._edge_target
        while p >= 0:
            edge = self._edge(p, token)
            if edge < 0 or target[edge] != q:
                break
            target[edge] = clone
            p = link[p]
        link[q] = clone
        return clone

    def _add_edge(self, state: int, token: int, target: int) -> None:
        edge = len(self._edge_token)
        self._edge_token.append(token)
        self._edge_target.append(target)
        self._edge_next.append(self._head[state])
        self._head[state] = edge
        degree = self._degree[state]
        if degree > HUB_DEGREE:
            self._hubs[state][token] = edge
        elif degree == HUB_DEGREE:
            self._degree[state] = degree + 1  # its dict is made on first use
        else:
            self._degree[state] = degree + 1

    def _edge(self, state: int, token: int) -> int:
        if self._degree[state] > HUB_DEGREE:
            return self._hubs[state].get(token, -1)
        tokens, following = self._edge_token, self._edge_next
        edge = self._head[state]
        while edge >= 0:
            if tokens[edge] == token:
                return edge
            edge = following[edge]
        return -1

    def _chain(self, state: int) -> list[int]:
        edges = []
        edge, following = self._head[state], self._edge_next
        while edge >= 0:
            edges.append(edge)
            edge = following[edge]
        return edges

    # -- reading ------------------------------------------------------------------------------

    def occurrences(self, state: int) -> int:
        """How many times the strings of `state` occur (end positions)."""
        return self._count[state]

    def tail(self) -> Match:
        """The open document's end, for a document matched against itself: continuations()
        then reads what followed its longest suffix that occurred before."""
        return Match(self._last, self._len[self._last])

    def continuations(self, match: Match, max_tokens: int, width: int = 1) -> list[Branch]:
        """Up to `width` continuations of the match, most frequent first token first, each
        followed greedily by its most frequent next token up to `max_tokens` tokens.

        Where the matched suffix only ever ended a document, the longest shorter suffix that was
        followed by something is continued instead (see `continued_length`)."""
        state = self._continued_state(match)
        if state == ROOT or max_tokens <= 0:
            return []
        ranked, support = self._ranked_edges(state)
        count, target, token_of = self._count, self._edge_target, self._edge_token
        head, following = self._head, self._edge_next
        branches = []
        for first in ranked[:width]:
            tokens, counts = [token_of[first]], [count[target[first]]]
            state = target[first]
            while len(tokens) < max_tokens:
                edge = head[state]
                if edge < 0:
                    break
                if following[edge] >= 0:  # more than one next token: take the best
                    edge = self._best_edge(state)
                tokens.append(token_of[edge])
                counts.append(count[target[edge]])
                state = target[edge]
            branches.append(Branch(tuple(tokens), tuple(counts), support))
        return branches

    def start_state(self, match: Match) -> int:
        """The state `continuations(match)` continues from (ROOT when nothing can)."""
        return self._continued_state(match)

    def children(self, state: int, width: int) -> tuple[list[tuple[int, int, int]], int]:
        """Up to `width` next tokens of a state, most frequent first, as (token, count,
        state reached), and the state's support (see Branch)."""
        edges, support = self._ranked_edges(state)
        token, target, count = self._edge_token, self._edge_target, self._count
        return [(token[e], count[target[e]], target[e]) for e in edges[:width]], support

    def _best_edge(self, state: int) -> int:
        if self._degree[state] > HUB_DEGREE:
            return self._ranked_edges(state)[0][0]
        count, recent, target, following = (
            self._count,
            self._recent,
            self._edge_target,
            self._edge_next,
        )
        best, best_key = -1, (-1, -1)
        edge = self._head[state]
        while edge >= 0:
            key = (count[target[edge]], recent[target[edge]])
            if key > best_key:
                best, best_key = edge, key
            edge = following[edge]
        return best

    def continued_length(self, match: Match) -> int:
        """The length of the suffix `continuations(match)` continues: the match's own, unless
        that only ever ended a document; 0 when nothing in the index can continue it."""
        state = self._continued_state(match)
        if state == ROOT:
            return 0
        return match.length if state == match.state else self._len[state]

    def _continued_state(self, match: Match) -> int:
        state = match.state
        head, link = self._head, self._link
        while state > ROOT and head[state] == -1:
            state = link[state]
        return state

    def _ranked_edges(self, state: int) -> tuple[list[int], int]:
        """Edges by the count of what they lead to, then by its latest occurrence; and the
        state's support, the occurrences of its strings that some token followed."""
        hub = self._degree[state] > HUB_DEGREE
        if hub:
            cached = self._ranked.get(state)
            # A state's edges and their targets' counts change only when a token is appended
            # right after one of its occurrences: not since, if it has no new occurrence and
            # its latest one was already followed when the ranking was made.
            hub_edges = len(self._hubs[state])
            if cached is not None and (cached[0], len(cached[2])) == (
                self._count[state],
                hub_edges,
            ):
                made_at = cached[1]
                if self.tokens == made_at or self._recent[state] != made_at - 1:
                    return cached[2], cached[3]
        count, recent, target = self._count, self._recent, self._edge_target
        edges = self._chain(state)
        if len(edges) > 1:
            edges.sort(key=lambda e: (count[target[e]], recent[target[e]]), reverse=True)
        support = sum(count[target[e]] for e in edges)
        if hub:
            self._ranked[state] = (count[state], self.tokens, edges, support)
        return edges, support

    # -- persistence --------------------------------------------------------------------------

    def columns(self) -> dict[str, array[int]]:
        """The index as flat columns, for a file to store (the arrays themselves, not copies)."""
        return {name: getattr(self, "_" + name) for name in COLUMNS}

    # -- size ---------------------------------------------------------------------------------

    @property
    def states(self) -> int:
        return len(self._len)

    @property
    def edges(self) -> int:
        return len(self._edge_token)

    def nbytes(self) -> int:
        """Bytes held by the index's columns and hub dicts (allocated, not just used)."""
        columns = self.columns().values()
        total = sum(sys.getsizeof(c) for c in columns) + sys.getsizeof(self._hubs)
        for hub in self._hubs.values():
            # Keys and values past the small-int cache are objects of their own.
            total += sys.getsizeof(hub) + sum(sys.getsizeof(k) + 32 for k in hub)
        return total


class _Hubs(dict[int, dict[int, int]]):
    """Branchy states' edges by token, each dict made from the state's chain when first asked
    for, so an index read from a file is ready before any of them is built."""

    def __init__(self, index: SuffixIndex) -> None:
        super().__init__()
        self._index = index

    def __missing__(self, state: int) -> dict[int, int]:
        tokens = self._index._edge_token
        hub = self[state] = {tokens[e]: e for e in self._index._chain(state)}
        return hub

"""The suffix automaton against brute force: match lengths, continuation counts, the greedy
branch, document boundaries, incremental growth and its columns."""

from __future__ import annotations

import random
from array import array
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.suffix_columns import index_from_columns
from app.engine.suffix_cursor import Cursor, longest_match
from app.engine.suffix_index import COUNT_DEPTH, HUB_DEGREE, SuffixIndex

Docs = list[list[int]]


def _next_tokens(docs: Docs, text: Sequence[int]) -> Counter[int]:
    """What followed each occurrence of `text` inside one document, counted."""
    n = len(text)
    found: Counter[int] = Counter()
    for doc in docs:
        for end in range(n, len(doc)):
            if doc[end - n : end] == list(text):
                found[doc[end]] += 1
    return found


def _occurs(docs: Docs, text: Sequence[int]) -> bool:
    n = len(text)
    return any(doc[i : i + n] == list(text) for doc in docs for i in range(len(doc) - n + 1))


def _longest_suffix(docs: Docs, query: Sequence[int]) -> int:
    length = 0
    while length < len(query) and _occurs(docs, query[len(query) - length - 1 :]):
        length += 1
    return length


def _longest_continued_suffix(docs: Docs, query: Sequence[int]) -> int:
    for length in range(_longest_suffix(docs, query), 0, -1):
        if _next_tokens(docs, query[len(query) - length :]):
            return length
    return 0


def _built(docs: Docs) -> SuffixIndex:
    index = SuffixIndex()
    for doc in docs:
        index.add_document(doc)
    return index


# Alphabets from 2 tokens (long repeats) to 30 (states with more than HUB_DEGREE next tokens).
alphabets = st.integers(min_value=2, max_value=30)


@st.composite
def corpora(draw: st.DrawFn) -> tuple[Docs, list[int]]:
    size = draw(alphabets)
    token = st.integers(min_value=0, max_value=size - 1)
    docs = draw(st.lists(st.lists(token, max_size=60), min_size=1, max_size=5))
    query = draw(st.lists(token, min_size=1, max_size=12))
    return docs, query


@settings(max_examples=300, deadline=None)
@given(corpora())
def test_match_and_continuation_counts_agree_with_brute_force(case: tuple[Docs, list[int]]) -> None:
    docs, query = case
    index = _built(docs)
    match = longest_match(index, query)
    assert match.length == _longest_suffix(docs, query)
    continued = index.continued_length(match)
    assert continued == _longest_continued_suffix(docs, query)
    branches = index.continuations(match, max_tokens=1, width=1000)
    expected = _next_tokens(docs, query[len(query) - continued :]) if continued else Counter()
    assert {b.tokens[0]: b.count for b in branches} == dict(expected)
    assert [b.count for b in branches] == sorted((b.count for b in branches), reverse=True)
    assert all(b.support == sum(expected.values()) for b in branches)


@settings(max_examples=300, deadline=None)
@given(corpora())
def test_each_branch_goes_on_with_the_most_frequent_next_token(
    case: tuple[Docs, list[int]],
) -> None:
    docs, query = case
    index = _built(docs)
    match = longest_match(index, query)
    start = list(query[len(query) - index.continued_length(match) :])
    for branch in index.continuations(match, max_tokens=8, width=3):
        text = [*start, branch.tokens[0]]
        for token, count in zip(branch.tokens[1:], branch.counts[1:], strict=True):
            following = _next_tokens(docs, text)
            assert following[token] == count == max(following.values())
            text.append(token)
        if len(branch.tokens) < 8:
            assert not _next_tokens(docs, text)  # it stopped where nothing followed


@settings(max_examples=300, deadline=None)
@given(alphabets.flatmap(lambda n: st.lists(st.integers(0, n - 1), min_size=1, max_size=80)))
def test_an_open_document_matches_its_own_longest_earlier_suffix(history: list[int]) -> None:
    index = SuffixIndex()
    for i, token in enumerate(history, start=1):
        index.extend([token])
        seen = history[:i]
        expected = max((n for n in range(1, i) if _next_tokens([seen], seen[i - n :])), default=0)
        tail = index.tail()
        assert index.continued_length(tail) == expected
        if expected:
            following = _next_tokens([seen], seen[i - expected :])
            best = index.continuations(tail, 1)[0]
            assert best.count == following[best.tokens[0]] == max(following.values())


def test_matches_never_cross_a_document_boundary() -> None:
    index = _built([[1, 2, 3], [4, 5, 6]])
    across = longest_match(index, [2, 3, 4, 5])
    assert across.length == 2  # "4 5" only: "3 4" is in no document
    assert index.continuations(across, 3)[0].tokens == (6,)
    # "2 3" ends its document: nothing follows it, and the next document is not what follows.
    end = longest_match(index, [1, 2, 3])
    assert end.length == 3
    assert index.continued_length(end) == 0
    assert index.continuations(end, 3) == []


def test_equal_counts_go_to_the_most_recent_occurrence() -> None:
    index = _built([[7, 8, 1, 2], [7, 8, 3, 4]])
    branches = index.continuations(longest_match(index, [7, 8]), 2, width=2)
    assert [b.tokens for b in branches] == [(3, 4), (1, 2)]
    # Twice each now, "7 8 1" last: recency, not the order the next tokens first came in.
    index.add_document([7, 8, 3, 4])
    index.add_document([7, 8, 1, 2])
    branches = index.continuations(longest_match(index, [7, 8]), 2, width=2)
    assert [(b.tokens, b.count) for b in branches] == [((1, 2), 2), ((3, 4), 2)]


def test_a_state_with_many_next_tokens_answers_as_a_short_one_does() -> None:
    next_tokens = list(range(100, 100 + 3 * HUB_DEGREE))
    index = _built([[1, 2, t] for t in next_tokens] + [[1, 2, 100]])
    branches = index.continuations(longest_match(index, [1, 2]), 1, width=len(next_tokens))
    assert {b.tokens[0] for b in branches} == set(next_tokens)
    assert branches[0].tokens == (100,) and branches[0].count == 2
    assert branches[0].support == len(next_tokens) + 1


def test_a_cursor_fed_piece_by_piece_equals_a_fresh_match() -> None:
    rng = random.Random(5)
    index = _built([[rng.randrange(6) for _ in range(300)] for _ in range(4)])
    query = [rng.randrange(6) for _ in range(400)]
    cursor = Cursor(index)
    fed = 0
    while fed < len(query):
        step = rng.randint(1, 5)
        cursor.feed(query[fed : fed + step])
        fed += step
        assert cursor.match.length == longest_match(index, query[:fed]).length
        assert index.continuations(cursor.match, 4) == index.continuations(
            longest_match(index, query[:fed]), 4
        )


def test_an_index_grown_in_pieces_is_the_index_built_at_once() -> None:
    rng = random.Random(9)
    docs = [[rng.randrange(12) for _ in range(rng.randint(0, 200))] for _ in range(6)]
    grown = SuffixIndex()
    for doc in docs:
        at = 0
        while at < len(doc):
            step = rng.randint(1, 7)
            grown.extend(doc[at : at + step])
            at += step
            grown.tail()  # reading between pieces changes nothing
        grown.end_document()
    assert grown.columns() == _built(docs).columns()


def test_a_change_makes_a_cursor_stale() -> None:
    index = _built([[1, 2, 3]])
    cursor = Cursor(index)
    cursor.feed([1, 2])
    assert cursor.fresh
    index.add_document([1, 2, 4])
    assert not cursor.fresh


def test_columns_rebuild_the_same_index() -> None:
    rng = random.Random(3)
    docs = [[rng.randrange(40) for _ in range(150)] for _ in range(10)]
    index = _built(docs)
    copied = {name: array(c.typecode, c) for name, c in index.columns().items()}
    twin = index_from_columns(copied, tokens=index.tokens, documents=index.documents)
    for _ in range(50):
        query = docs[rng.randrange(10)][: rng.randint(1, 150)]
        assert twin.continuations(longest_match(twin, query), 6, 3) == index.continuations(
            longest_match(index, query), 6, 3
        )


@pytest.mark.parametrize(
    ("column", "position", "value"),
    [
        ("link", 2, 2),  # a state its own suffix: a walk up the links would never end
        ("link", 1, 10**6),
        ("edge_target", 0, 10**6),
        ("edge_next", 1, 1),  # an edge chain that loops
        ("head", 1, 10**6),
    ],
)
def test_malformed_columns_are_refused(column: str, position: int, value: int) -> None:
    index = _built([[1, 2, 1, 2, 3]])
    columns = {name: array(c.typecode, c) for name, c in index.columns().items()}
    columns[column][position] = value
    with pytest.raises(ValueError):
        index_from_columns(columns, tokens=5, documents=1)


def test_a_run_longer_than_the_count_depth_is_still_continued_by_itself() -> None:
    run = [5] * (3 * COUNT_DEPTH)
    index = _built([[*run, 6], [1, 2, 3]])
    branches = index.continuations(longest_match(index, [4, 5, 5]), 4, width=2)
    assert branches[0].tokens == (5, 5, 5, 5)
    assert {b.tokens[0] for b in branches} == {5, 6}
    # Long states of the run count exactly; its short ones stop at the depth (documented).
    long = len(run) - COUNT_DEPTH // 2
    assert index.occurrences(longest_match(index, run[:long]).state) == len(run) - long + 1
    assert index.occurrences(longest_match(index, run[:2]).state) == COUNT_DEPTH

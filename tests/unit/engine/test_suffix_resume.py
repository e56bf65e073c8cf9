"""A reply copying a text with an edit: the suffix drafter picks the text up again right after
the edit (a word dropped, added or replaced), not two plain steps later; only where the reply
was following a long match, and only near the break."""

from __future__ import annotations

from app.engine.suffix_drafter import SuffixDrafter, SuffixProposal
from app.engine.suffix_resume import CopyWindow
from app.metrics.cost_model import MAX_GAMMA

# A text of 60 distinct tokens, a separator, then the reply copying its first 20.
TEXT = list(range(1000, 1060))
COPYING = [*TEXT, 7, *TEXT[:20]]


def _following() -> SuffixDrafter:
    """A drafter whose last proposal followed the text (a 20-token match)."""
    drafter = SuffixDrafter()
    first = drafter.peek(COPYING, MAX_GAMMA)
    assert first.source == "conversation" and first.match_length == 20
    assert first.tokens[0] == TEXT[20]
    return drafter


def _after(edit: list[int]) -> SuffixProposal:
    return _following().peek([*COPYING, *edit], MAX_GAMMA)


def test_a_dropped_word_is_skipped_and_the_text_proposed_on_from_the_next() -> None:
    proposal = _after([TEXT[23]])  # TEXT[20:23] left out
    assert proposal.source == "resume"
    assert proposal.tokens[:5] == tuple(TEXT[24:29])


def test_an_added_word_is_stepped_over_once_the_text_comes_back() -> None:
    proposal = _after([5, TEXT[20]])  # 5 put in before the text goes on
    assert proposal.source == "resume"
    assert proposal.tokens[:5] == tuple(TEXT[21:26])


def test_a_replaced_word_is_stepped_over_once_the_text_comes_back() -> None:
    proposal = _after([5, 6, TEXT[22]])  # TEXT[20:22] replaced by two other tokens
    assert proposal.tokens[:5] == tuple(TEXT[23:28])


def test_the_resumed_draft_runs_as_far_as_resumes_are_kept() -> None:
    edited = [*COPYING, TEXT[23]]
    trusted = _following().peek(edited, MAX_GAMMA)
    drafter = _following()
    for _ in range(40):  # resumes after such matches kept one token in two
        drafter.kept_by_match.add(20, 1, 2, "resume")
    doubted = drafter.peek(edited, MAX_GAMMA)
    assert drafter.kept_by_match.keep_rate(20, "resume") < 0.6
    assert len(doubted.tokens) == 2 < len(trusted.tokens)  # 0.5² ≥ min_survival > 0.5³
    assert doubted.expected_accepted < trusted.expected_accepted


def test_a_reply_that_has_left_the_text_gets_nothing_from_it() -> None:
    assert _after([5, 6, 8, 9, 11, TEXT[20]]).tokens == ()  # five tokens since the break
    assert _after([TEXT[40]]).tokens == ()  # an anchor 20 tokens on is chance, not a skip


def test_only_a_long_match_leaves_a_text_to_pick_up() -> None:
    drafter = SuffixDrafter()
    short = [*TEXT, 7, *TEXT[:3]]  # a 3-token match: a phrase, not a text being followed
    assert drafter.peek(short, MAX_GAMMA).match_length == 3
    assert drafter.peek([*short, TEXT[5]], MAX_GAMMA).tokens == ()


def test_a_text_picked_up_is_not_picked_up_again_from_there() -> None:
    drafter = _following()
    resumed = drafter.peek([*COPYING, TEXT[23]], MAX_GAMMA)
    assert resumed.source == "resume" and resumed.tokens[0] == TEXT[24]
    # The same history asks again: the same proposal. Its first tokens refused for one found
    # further on, nothing: an anchor on an anchor is chance.
    assert drafter.peek([*COPYING, TEXT[23]], MAX_GAMMA) == resumed
    assert drafter.peek([*COPYING, TEXT[23], TEXT[26]], MAX_GAMMA).tokens == ()


def test_a_new_reply_does_not_pick_up_the_last_one_s_text() -> None:
    drafter = _following()
    drafter.prefill([*COPYING])  # the same conversation, a new reply
    assert drafter.peek([*COPYING, TEXT[23]], MAX_GAMMA).tokens == ()


def test_a_window_that_goes_on_unbroken_is_proposed_on() -> None:
    window = CopyWindow(10, (1, 2, 3, 4), 20)
    assert window.resumed([0] * 10 + [1, 2]) == (3, 4)
    assert window.resumed([0] * 10 + [1, 9, 3]) == (4,)  # one token replaced

"""A suffix proposal another source drafted in place of is judged all the same, on the tokens the
target emitted after it: the hybrid's draft model wins most rounds where a short match or a past
chat proposes, and the keep rates of those matches must not rest on the few rounds it loses."""

from __future__ import annotations

import copy

from app.engine.suffix_drafter import SuffixDrafter
from app.metrics.cost_model import MAX_GAMMA
from app.metrics.rounds import RoundRecord
from tests.helpers.hybrid_rounds import ask, cheap_kept_model_after_a_first_chat

# A text of 30 distinct tokens, a separator, then a reply that repeats its first 8.
TEXT = list(range(1000, 1030))
REPEATING = [*TEXT, 7, *TEXT[:8]]
MATCH = 8


def _set_aside() -> SuffixDrafter:
    """A drafter whose proposal after REPEATING (the text's next tokens) was set aside."""
    drafter = SuffixDrafter()
    proposal = drafter.peek(REPEATING, MAX_GAMMA)
    assert proposal.tokens[:4] == tuple(TEXT[8:12]) and proposal.match_length == MATCH
    drafter.set_aside(REPEATING, proposal)
    return drafter


def _keep_after(kept: int, judged: int) -> float:
    """The keep rate of a drafter told, as a drafted proposal's verdict, kept of judged."""
    reference = SuffixDrafter()
    reference.kept_by_match.add(MATCH, kept, judged)
    return reference.kept_by_match.keep_rate(MATCH)


def test_tokens_emitted_as_proposed_count_as_kept() -> None:
    drafter = _set_aside()
    drafter.judge_set_aside([*REPEATING, *TEXT[8:11]])  # a round that emitted 3 of them
    assert drafter.kept_by_match.keep_rate(MATCH) == _keep_after(3, 3)
    assert _keep_after(3, 3) > SuffixDrafter().kept_by_match.keep_rate(MATCH)


def test_the_first_token_emitted_otherwise_is_a_miss_and_nothing_after_it_counts() -> None:
    drafter = _set_aside()
    drafter.judge_set_aside([*REPEATING, TEXT[8], 5, TEXT[10]])
    assert drafter.kept_by_match.keep_rate(MATCH) == _keep_after(1, 3)
    assert _keep_after(1, 3) < SuffixDrafter().kept_by_match.keep_rate(MATCH)


def test_a_proposal_is_judged_once_and_only_in_the_conversation_it_was_made_in() -> None:
    prior = SuffixDrafter().kept_by_match.keep_rate(MATCH)
    judged_twice = _set_aside()
    judged_twice.judge_set_aside([*REPEATING, TEXT[8]])
    judged_twice.judge_set_aside([*REPEATING, TEXT[8], TEXT[9]])
    assert judged_twice.kept_by_match.keep_rate(MATCH) == _keep_after(1, 1)

    new_reply = _set_aside()
    new_reply.prefill([3, 4, 5])
    new_reply.judge_set_aside([3, 4, 5, 6])
    other_chat = _set_aside()
    other_chat.judge_set_aside([*TEXT[:20], 9, 9])
    nothing_yet = _set_aside()
    nothing_yet.judge_set_aside(REPEATING)
    for drafter in (new_reply, other_chat, nothing_yet):
        assert drafter.kept_by_match.keep_rate(MATCH) == prior


def test_the_hybrid_judges_the_proposal_its_draft_model_drafted_in_place_of() -> None:
    _, hybrid = cheap_kept_model_after_a_first_chat()
    history = [*TEXT, 7, *TEXT[:2]]  # a 2-token match: TEXT[2:] proposed, doubtfully
    hybrid.prefill(history[:-1])
    draft = hybrid.propose(ask(history, 4))
    assert draft.steps == 4 and draft.suffix_tokens == 0  # the cheap, reliable model drafts
    # The target kept the model's first token (the text's, as the suffix index proposed) and
    # emitted another second.
    hybrid.learn(RoundRecord(500, "hybrid", 4, 4, 1, 2, 0.004, 0.02, 4))
    expected = copy.deepcopy(hybrid.suffix.kept_by_match)
    expected.add(2, 1, 2)

    hybrid.propose(ask([*history, TEXT[2], 5], 4))

    assert hybrid.suffix.kept_by_match.keep_rate(2) == expected.keep_rate(2)
    assert expected.keep_rate(2) != SuffixDrafter().kept_by_match.keep_rate(2)

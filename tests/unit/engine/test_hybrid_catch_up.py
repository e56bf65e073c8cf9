"""The hybrid's draft model, left behind by rounds the suffix index drafted alone, catches up
outside its timed passes, so its cost per pass stays what a pass costs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import pytest

from app.engine.config import SamplingConfig
from app.engine.drafters import DraftRequest
from app.engine.hybrid_drafter import HybridDrafter
from app.metrics.rounds import RoundRecord
from tests.helpers.hybrid_rounds import (
    N_VOCAB,
    ask,
    cheap_kept_model_after_a_first_chat,
    conversation,
    fake_hybrid,
    measure_without_model,
    plain_rounds_before_reading,
    rounds_to_cover,
    teach,
)


def test_a_draft_model_left_behind_reads_the_gap_outside_its_timed_passes() -> None:
    model, hybrid = fake_hybrid()
    history = list(range(40))  # no token repeats: the suffix index has nothing to offer
    hybrid.prefill(history[:9])  # nothing measured yet: the model reads the prompt at once
    behind = len(history) - 1 - len(model.tokens)
    assert behind == 30

    draft = hybrid.propose(ask(history, 4))

    assert draft.suffix_tokens == 0 and draft.steps == 4
    assert draft.tokens == [40, 41, 42, 43]
    # The passes' own cost: one token each, the gap read apart (and timed as catch-up).
    assert draft.seconds == pytest.approx(4 * 1e-3)
    assert draft.catchup_s == pytest.approx(30 * 1e-3)
    assert len(model.tokens) >= 39


def test_a_long_gap_is_left_unread_when_reading_it_costs_more_than_the_model_saves() -> None:
    model, hybrid = fake_hybrid()
    # A draft model that is always kept: its rounds run at about 130 tokens/s against plain
    # decoding's 50, saving some 1.6 s over a reply of 128 tokens.
    teach(hybrid, verify_s=0.02, draft_pass_s=0.004)
    first = conversation(40, 0)
    hybrid.prefill(first[:-1])  # nothing measured yet: read, and its speed measured (1 ms)
    hybrid.propose(ask(first, 4))
    read = model.decoded

    # A new conversation of 2,000 tokens, 2 s to read, that repeats itself.
    repeated = [7, 3, 9, 1, 4] * 400 + [7, 3, 9]
    hybrid.prefill(repeated[:-1])
    draft = hybrid.propose(ask(repeated, 8))

    assert draft.tokens and draft.suffix_tokens == len(draft.tokens) and draft.steps == 0
    assert draft.catchup_s == 0.0 and model.decoded == read  # not one token read


def test_a_prompt_is_read_at_once_when_the_model_will_earn_it_back() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()

    second = conversation(60, 5)  # no repeats: only the model can draft
    hybrid.prefill(second[:-1])
    assert model.tokens == second[:-1]  # read as prompt time, before the first round
    draft = hybrid.propose(ask(second, 4))

    assert draft.steps == 4 and draft.suffix_tokens == 0


@pytest.mark.parametrize(("length", "read_at_once"), [(90, True), (110, False)])
def test_a_question_is_read_at_once_and_a_text_longer_than_one_waits(
    length: int, read_at_once: bool
) -> None:
    """Up to 96 tokens a prompt is a question or an instruction: the model reads it at once,
    as the draft model alone does; beyond, it may be a text the reply copies, and waits."""
    model, hybrid = cheap_kept_model_after_a_first_chat()

    second = conversation(length, 5)
    hybrid.prefill(second[:-1])

    assert (model.tokens == second[:-1]) is read_at_once


def test_one_stalled_round_does_not_keep_the_draft_model_out_of_use() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()
    # The machine stalls for two seconds in one 17-token round of the draft model.
    hybrid.learn(RoundRecord(40, "hybrid", 16, 16, 16, 17, 1.0, 1.0, 16))

    second = conversation(60, 5)  # no repeats: only the model can draft
    hybrid.prefill(second[:-1])
    assert model.tokens == second[:-1]
    draft = hybrid.propose(ask(second, 4))
    assert draft.steps == 4


def test_where_the_suffix_index_keeps_taking_over_a_gap_must_pay_within_the_models_runs() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()
    # A text being revised: one model round, then the suffix index takes a long stretch (16
    # tokens, more than a pass reads), and again.
    for i in range(20):
        hybrid.learn(RoundRecord(100 + 2 * i, "hybrid", 4, 4, 4, 5, 0.004, 0.02, 4))
        stretch = RoundRecord(
            101 + 2 * i, "hybrid", 16, 16, 16, 17, 0.0, 0.04, 0, suffix_drafted=16
        )
        hybrid.learn(stretch)
    read = model.decoded

    # 200 tokens to read (0.2 s): a whole reply would earn it back, a run of one or two model
    # rounds would not.
    second = conversation(200, 3)
    measure_without_model(hybrid, verify_s=0.02, prompt=second)
    draft = hybrid.propose(ask(second, 4))

    assert draft.steps == 0 and model.decoded == read


def test_a_few_suffix_tokens_or_a_plain_round_do_not_cut_the_models_payback_span() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()
    # A chat: model rounds, between them a plain round (a reply's first) or a phrase of three
    # tokens the suffix index has seen; the model reads either gap in one pass.
    for i in range(20):
        hybrid.learn(RoundRecord(100 + 2 * i, "hybrid", 4, 4, 4, 5, 0.004, 0.02, 4))
        if i % 2:
            hybrid.learn(RoundRecord(101 + 2 * i, "hybrid", 0, 0, 0, 1, 0.0, 0.02, 0))
        else:
            hybrid.learn(
                RoundRecord(101 + 2 * i, "hybrid", 3, 3, 3, 4, 0.0, 0.02, 0, suffix_drafted=3)
            )

    # The same 200 tokens as above: a whole reply earns them back.
    second = conversation(200, 3)
    measure_without_model(hybrid, verify_s=0.02, prompt=second)
    draft = hybrid.propose(ask(second, 4))

    assert draft.steps == 4 and model.tokens[: len(second) - 1] == second[:-1]


def test_a_long_gap_of_unknown_reading_speed_has_a_part_read_to_time_it_first() -> None:
    model, hybrid = fake_hybrid()
    teach(hybrid, verify_s=0.02, draft_pass_s=0.001)  # a cheap draft model that is kept
    # No repeats; 0.9 s to read, more than the model saves over its usual run (about 36 tokens).
    prompt = conversation(900, 0)
    hybrid.prefill(prompt[:-1])
    assert model.tokens == []  # nothing is read before the rate without the model is known
    for i in range(4):
        draft = hybrid.propose(ask(prompt, 4))
        hybrid.learn(RoundRecord(i, "hybrid", 4, 0, 0, 1, 0.0, 0.02, 0))
    assert draft.catchup_s == 0.0

    # Plain steps are slow enough that the model is wanted: its first 64 tokens are read to
    # time the reading, and at that speed the rest does not pay.
    draft = hybrid.propose(ask(prompt, 4))

    assert model.tokens == prompt[:64] and draft.steps == 0
    assert draft.catchup_s == pytest.approx(64 * 1e-3)


def test_a_long_prompt_waits_for_the_rate_without_the_model_and_is_read_when_that_is_slow() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()

    second = conversation(300, 5)  # no repeats: only the model can draft
    hybrid.prefill(second[:-1])
    assert len(model.tokens) < 100  # the reply starts before the model reads the prompt
    plain = hybrid.propose(ask(second, 4))
    assert plain.tokens == [] and plain.catchup_s == 0.0
    # Plain steps at 50 tokens/s, against the model's ~190: reading 300 tokens (0.3 s) pays,
    # and is done once they have taken as long (20 rounds of 20 ms, faded).
    for i in range(rounds_to_cover(0.299, 0.02)):
        assert model.tokens[: len(second) - 1] != second[:-1]
        hybrid.learn(RoundRecord(100 + i, "hybrid", 4, 0, 0, 1, 0.0, 0.02, 0))
        draft = hybrid.propose(ask(second, 4))

    assert draft.steps == 4 and draft.catchup_s > 0.0
    assert model.tokens[: len(second) - 1] == second[:-1]


@pytest.mark.parametrize(
    ("reply_left", "read"), [(128, True), (40, True), (24, False), (10, False)]
)
def test_a_reading_must_pay_back_within_what_the_reply_may_still_produce(
    reply_left: int, read: bool
) -> None:
    """The same slow plain steps as above, the model at ~210 tokens/s: 15 ms saved a token.
    With 10 tokens left, 0.15 s at most, less than the 0.3 s reading; with 128 left, it pays.
    The reply may end sooner than its budget, so a long reading must save 1.5 times its cost:
    24 tokens left (0.37 s) do not buy it, 40 (0.61 s) do."""
    model, hybrid = cheap_kept_model_after_a_first_chat()
    second = conversation(300, 5)
    hybrid.prefill(second[:-1])

    for i in range(2 * rounds_to_cover(0.299, 0.02)):
        hybrid.learn(RoundRecord(100 + i, "hybrid", 4, 0, 0, 1, 0.0, 0.02, 0))
        hybrid.propose(replace(ask(second, 4), reply_left=reply_left))

    assert (model.tokens[: len(second) - 1] == second[:-1]) is read


def test_a_long_prompt_dear_to_read_waits_for_rounds_in_proportion_before_it_is_read() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()
    # 350 tokens, 0.35 s to read: plain steps at 50 tokens/s against the model's ~210 earn it
    # back 1.5 times over the model's usual run (about 36 tokens: 0.55 s), but a few 20 ms
    # rounds are too few to stake it on.
    prompt = conversation(350, 5)
    rounds = plain_rounds_before_reading(hybrid, prompt, first_round=600)

    # Rounds that have taken (faded) as long as the reading would: 25 of 20 ms.
    assert rounds == rounds_to_cover(0.349, 0.02) == 25
    assert model.tokens[: len(prompt) - 1] == prompt[:-1]


def test_a_long_prompt_stays_unread_while_the_suffix_index_delivers_as_much_alone() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()
    read = model.decoded

    # Pasted text returned with a change: 400 tokens the reply copies, 16 kept a round.
    pasted = [7, 3, 9, 1, 4] * 80
    hybrid.prefill(pasted[:-1])
    for i in range(6):
        hybrid.propose(ask(pasted, 16))
        hybrid.learn(
            RoundRecord(200 + i, "hybrid", 16, 16, 16, 17, 0.0, 0.03, 0, suffix_drafted=16)
        )
    # A stretch the suffix index has nothing for: a plain step, and the model stays unread.
    fresh = [*pasted, 50, 51]
    draft = hybrid.propose(ask(fresh, 4))

    assert draft.steps == 0 and draft.catchup_s == 0.0 and model.decoded == read


def test_a_long_prompt_is_weighed_on_its_own_replys_rounds_not_on_an_earlier_replys() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()
    # A chat reply ran plain steps at 50 tokens/s until the model read its 300-token prompt.
    measure_without_model(hybrid, verify_s=0.02, prompt=conversation(300, 11))
    read = model.decoded

    # Then text pasted to be returned with a change: 150 tokens that the reply copies. Those
    # plain steps would have it read (0.15 s, earned back at 50 tokens/s), and in vain.
    pasted = conversation(150, 600)
    prompt = [*pasted, 900]
    hybrid.prefill(prompt[:-1])
    assert model.decoded == read
    history = [*prompt, *pasted[:2]]
    for i in range(6):
        draft = hybrid.propose(ask(history, 16))
        assert draft.tokens and draft.steps == 0 and draft.catchup_s == 0.0
        history = [*history, *draft.tokens, pasted[len(history) - len(prompt) + len(draft.tokens)]]
        n = len(draft.tokens)
        hybrid.learn(RoundRecord(500 + i, "hybrid", n, n, n, n + 1, 0.0, 0.03, 0, n))

    assert model.decoded == read


def test_suffix_rounds_won_over_a_model_nearly_up_to_date_are_not_drafting_without_it() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()
    first = conversation(40, 0)
    # The reply repeats the chat's start: the suffix index wins round after round, fast, while the
    # model, a few tokens behind, stays in play.
    for k in range(1, 6):
        draft = hybrid.propose(ask([*first, *range(8 * k)], 8))
        assert draft.steps == 0 and draft.suffix_tokens
        hybrid.learn(RoundRecord(300 + k, "hybrid", 8, 8, 8, 9, 0.0, 0.03, 0, suffix_drafted=8))

    # A long new chat: only plain steps at 50 tokens/s run while the model is out of play, and
    # they alone say what drafting without it delivers, so the model is read.
    second = conversation(300, 500)
    hybrid.prefill(second[:-1])
    for i in range(rounds_to_cover(0.299, 0.02)):  # as long as reading it takes
        hybrid.propose(ask(second, 4))
        hybrid.learn(RoundRecord(400 + i, "hybrid", 4, 0, 0, 1, 0.0, 0.02, 0))
    draft = hybrid.propose(ask(second, 4))

    assert draft.steps == 4 and model.tokens[: len(second) - 1] == second[:-1]


def test_a_prompt_ending_as_an_earlier_one_did_is_not_read_before_the_first_round() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()
    read = model.decoded
    first = conversation(40, 0)

    # The same question again: the prompt's last 30 tokens are the first chat's.
    again = [*first, 900, *first[:30]]
    hybrid.prefill(again[:-1])
    assert model.decoded == read  # a cheap, always-kept model would be read for a new prompt
    draft = hybrid.propose(ask(again, 8))

    assert draft.steps == 0 and draft.suffix_tokens == 8 and model.decoded == read


def test_draft_tokens_the_target_kept_are_not_counted_as_a_gap_read() -> None:
    model, hybrid = fake_hybrid()
    # A draft model at 5 ms a pass, always kept: about 120 tokens/s against plain decoding's
    # 50, which saves about 0.7 s over its usual run of rounds (about 60 tokens).
    teach(hybrid, verify_s=0.02, draft_pass_s=0.005)
    history = conversation(40, 0)
    hybrid.prefill(history[:-1])  # read, and its reading timed: 1 ms a token
    for i in range(5):
        draft = hybrid.propose(ask(history, 16))
        assert draft.steps == 16 and draft.suffix_tokens == 0
        # The target keeps all 16 and adds one: the model's cache holds 15 of them already,
        # so the next round reads one token, not 17 in the time of one.
        history = [*history, *draft.tokens, (draft.tokens[-1] + 1) % N_VOCAB]
        hybrid.learn(RoundRecord(i, "hybrid", 16, 16, 16, 17, 0.08, 0.03, 16))

    # A new conversation of 900 tokens: 0.9 s to read at the speed measured, more than the
    # model saves. Counting the kept drafts as read, reading would look 2.5 times faster.
    second = conversation(900, 100)
    hybrid.prefill(second[:-1])
    read = model.decoded
    for i in range(6):
        draft = hybrid.propose(ask(second, 4))
        hybrid.learn(RoundRecord(100 + i, "hybrid", 4, 0, 0, 1, 0.0, 0.02, 0))

    assert draft.steps == 0 and model.decoded - read <= 64


def test_after_a_round_kept_whole_the_model_reads_its_last_tokens_in_its_first_pass() -> None:
    model, hybrid = fake_hybrid()
    teach(hybrid, verify_s=0.02, draft_pass_s=0.005)
    history = conversation(40, 0)
    hybrid.prefill(history[:-1])
    for i in range(3):
        passes = model.passes
        draft = hybrid.propose(ask(history, 4))
        # Its last draft token and the target's own are two tokens behind: read apart, they
        # would cost a pass no round's rate shows.
        assert draft.steps == 4 and model.passes - passes == 4
        assert draft.catchup_s == 0.0
        history = [*history, *draft.tokens, (draft.tokens[-1] + 1) % N_VOCAB]
        hybrid.learn(RoundRecord(i, "hybrid", 4, 4, 4, 5, 0.02, 0.03, 4))


def test_a_draft_model_that_lost_its_first_rounds_gets_a_round_again_later() -> None:
    _, hybrid = fake_hybrid()
    # Its rounds so far ran at about 23 tokens/s against plain decoding's 50.
    teach(hybrid, verify_s=0.02, draft_pass_s=0.05)
    steps = _model_steps(hybrid, 40, draft_pass_s=0.05, kept=False)

    # Up to date, it drafts the first round; then plain steps, and after 16 of them one more
    # round of the model; having lost it again, the next waits 32.
    assert [i for i, s in enumerate(steps) if s] == [0, 17]


def test_a_draft_model_cache_emptied_elsewhere_is_known_to_need_reading() -> None:
    model, hybrid = cheap_kept_model_after_a_first_chat()
    prompt = conversation(40, 0)[:-1]
    model.reset()  # as a benchmark does between runs: the hybrid is not told
    hybrid.prefill(prompt)
    assert model.tokens == prompt


def test_a_draft_model_up_to_date_is_not_set_aside_for_a_loss_within_timing_noise() -> None:
    _, hybrid = fake_hybrid()
    # Its rounds ran at about 48.5 tokens/s against plain decoding's 50: 3 % is timing noise,
    # and whether to draft at all is γ auto's call.
    teach(hybrid, verify_s=0.02, draft_pass_s=0.0208)
    assert all(_model_steps(hybrid, 20, draft_pass_s=0.0208, kept=True))


def test_at_a_gamma_set_by_hand_a_losing_draft_model_still_drafts_every_round() -> None:
    _, hybrid = fake_hybrid()
    teach(hybrid, verify_s=0.02, draft_pass_s=0.05)  # about 23 tokens/s against 50
    steps = _model_steps(hybrid, 20, draft_pass_s=0.05, kept=False, ask=_ask_as_set)
    assert steps == [4] * 20


def _ask_as_set(history: Sequence[int], max_tokens: int) -> DraftRequest:
    """A round at a γ set by hand: no free limit."""
    return DraftRequest(history, max_tokens, SamplingConfig(), np.random.default_rng(0), 0.0)


def _model_steps(
    hybrid: HybridDrafter,
    n_rounds: int,
    *,
    draft_pass_s: float,
    kept: bool,
    ask: Callable[[Sequence[int], int], DraftRequest] = ask,
) -> list[int]:
    """Rounds of γ 4 on a conversation the suffix index has nothing on, each model token
    costing draft_pass_s a pass and all kept or all rejected: the passes each round ran."""
    history = conversation(40, 0)
    hybrid.prefill(history[:-1])
    steps = []
    for i in range(n_rounds):
        draft = hybrid.propose(ask(history, 4))
        steps.append(draft.steps)
        history = [*history, *draft.tokens, (history[-1] + len(draft.tokens) + 1) % N_VOCAB]
        n = len(draft.tokens)
        accepted = n if kept else 0
        hybrid.learn(
            RoundRecord(i, "hybrid", n, n, accepted, accepted + 1, draft_pass_s * n, 0.02, n)
        )
    return steps


def _short_rounds(hybrid: HybridDrafter, n_rounds: int, *, kept: bool) -> list[int]:
    """Rounds as γ auto's first ones: one token drafted, in 50 ms with verification, slower
    than a 20 ms plain step; the passes each round ran (0: a plain step)."""
    history = conversation(40, 0)  # no repeats: the suffix index has nothing
    hybrid.prefill(history[:-1])  # nothing measured yet: read, and its reading timed
    steps = []
    for i in range(n_rounds):
        draft = hybrid.propose(ask(history, 4))
        steps.append(draft.steps)
        history = [*history, *draft.tokens, (history[-1] + len(draft.tokens) + 1) % N_VOCAB]
        drafted = min(1, len(draft.tokens))
        accepted = drafted if kept else 0
        hybrid.learn(
            RoundRecord(i, "hybrid", drafted, drafted, accepted, accepted + 1, 0.03, 0.02, drafted)
        )
    return steps


def test_a_draft_model_keeps_drafting_until_its_rate_stands_on_a_few_rounds() -> None:
    _, hybrid = fake_hybrid()
    steps = _short_rounds(hybrid, 12, kept=False)
    first_plain = steps.index(0)
    assert first_plain >= 7 and all(steps[:first_plain])


def test_a_kept_draft_model_cut_short_keeps_drafting_while_gamma_auto_learns_its_lengths() -> None:
    _, hybrid = fake_hybrid()
    # Every token kept, but one a round: γ auto's stop still doubts its tokens. Its rate (40
    # tokens/s against plain's 50) is its caution's, so it goes on for its learning rounds;
    # past them, if its rounds stay short, that rate decides.
    steps = _short_rounds(hybrid, 40, kept=True)
    first_plain = steps.index(0)
    assert first_plain >= 32 and all(steps[:first_plain])


def test_new_text_is_read_at_once_unless_the_prompt_asks_again() -> None:
    model, hybrid = fake_hybrid()
    fresh = conversation(60, 0)
    hybrid.prefill(fresh)  # nothing measured yet: read at once
    assert model.tokens == fresh

    # Ends as an earlier stretch did, as a question asked again word for word: the suffix
    # index drafts the first round, and the model reads only if that pays.
    hybrid.prefill([*fresh, *fresh[:20]])
    assert model.tokens == fresh


def test_rounds_that_end_replies_on_a_drafted_end_token_leave_the_model_usable() -> None:
    # JSON replies whose last round drafts only the end of sequence: the target keeps it, and
    # the round adds no token to the reply. Four of those made the model's measured rate 0,
    # and the next model round divided by it, for every request after, until a restart.
    _model, hybrid = fake_hybrid()
    for i in range(4):
        hybrid.learn(RoundRecord(i, "hybrid", 1, 1, 1, 0, 0.001, 0.02, 1))
    hybrid.learn(RoundRecord(4, "hybrid", 4, 4, 4, 5, 0.004, 0.02, 4))
    history = conversation(40, 0)
    hybrid.prefill(history[:-1])
    assert hybrid.propose(ask(history, 4)).tokens  # still drafts

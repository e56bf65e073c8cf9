"""γ auto has a draft model read a long prompt only when the reply's budget can pay for the
reading, or when the conversation goes on after a reply that left it unread, on the demo pair:
the draft reads a token a pass, so a page of prompt costs more than a few drafted tokens save."""

from __future__ import annotations

from typing import Any

from app.engine import gamma
from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.drafters import ModelDrafter
from app.llama.config import ModelConfig
from tests.helpers.engine import engine_of, loaded_runtime, run_to_end

SHORT: list[ChatMessage] = [{"role": "user", "content": "Explain what a binary search tree is."}]
PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs each evening, trimmed the wick, wound the "
    "clockwork that turned the lens, and wrote the weather into a leather book. "
)
LONG: list[ChatMessage] = [
    {"role": "user", "content": PASSAGE * 4 + "\nSay in one line what the keeper did."}
]

BAKERY = (
    "Before dawn the baker lit the oven, weighed flour and salt on a brass scale, folded the "
    "dough four times, and chalked the day's loaves on a slate by the door. "
)
OTHER: list[ChatMessage] = [
    {"role": "user", "content": BAKERY * 4 + "\nName the one tool the baker used most."}
]
NEXT: list[ChatMessage] = [{"role": "user", "content": "Why that one?"}]


def test_a_long_prompt_is_read_for_a_long_reply_and_left_unread_for_a_short_one(
    demo_models: Any,
) -> None:
    with loaded_runtime(
        ModelConfig(str(demo_models.f32), n_ctx=1024),
        ModelConfig(str(demo_models.q4_1), n_ctx=1024),
        suffix=False,
    ) as rt:
        drafter = rt.drafter
        assert isinstance(drafter, ModelDrafter)
        engine = engine_of(rt)
        # A first reply measures what γ auto weighs: the reading rate, plain steps, and what
        # speculation's rounds deliver.
        first, _ = run_to_end(
            engine, rt.chat_prompt(SHORT), GenerationConfig(max_tokens=64, gamma=gamma.AUTO)
        )
        assert first.stats.draft_prefill_s > 0.0
        assert any(r.drafted for r in first.rounds)

        prompt = rt.chat_prompt(LONG)
        short_reply = GenerationConfig(max_tokens=8, gamma=gamma.AUTO, exact=True)
        skipped, _ = run_to_end(engine, prompt, short_reply)
        plain, _ = run_to_end(engine, prompt, short_reply, speculative=False)
        # Eight tokens save less than reading some 170 costs: the reply runs plain, unread.
        assert skipped.stats.draft_prefill_s == 0.0
        assert not any(r.drafted for r in skipped.rounds)
        assert drafter.unread(prompt[:-1]) > 100
        assert len(skipped.notices) == 1 and "draft model off for this reply" in skipped.notices[0]
        assert skipped.token_ids == plain.token_ids

        long_reply = GenerationConfig(max_tokens=200, gamma=gamma.AUTO, exact=True)
        read, _ = run_to_end(engine, prompt, long_reply)
        plain, _ = run_to_end(engine, prompt, long_reply, speculative=False)
        assert read.stats.draft_prefill_s > 0.0
        assert any(r.drafted for r in read.rounds)
        assert read.token_ids == plain.token_ids

        # Left unread once more, then the conversation goes on: however short the next reply,
        # the draft reads now, since the replies still to come can pay for it.
        skipped, _ = run_to_end(engine, rt.chat_prompt(OTHER), short_reply)
        assert skipped.stats.draft_prefill_s == 0.0
        follow_up = rt.chat_prompt([*OTHER, {"role": "assistant", "content": skipped.text}, *NEXT])
        went_on, _ = run_to_end(engine, follow_up, short_reply)
    assert went_on.stats.draft_prefill_s > 0.0
    assert not went_on.notices
    assert any(r.drafted for r in went_on.rounds)

"""Greedy speculative decoding must reproduce plain greedy decoding token for token, on the real
demo models, for every draft and for prompt lookup."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.drafters import ModelDrafter, PromptLookupDrafter
from app.engine.events import RoundEvent, TokenEvent
from app.engine.gamma import fixed
from app.engine.loop import SpeculativeEngine
from app.engine.runtime import Runtime
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from tests.helpers.engine import run_to_end

LONG_PASSAGE = (
    "The Vistula is the longest river in Poland, flowing 1,047 kilometres from the Beskids in "
    "the south to the Baltic Sea near Gdańsk. It drains a basin of about 194,000 square "
    "kilometres, most of it in Poland, and passes Kraków, Warsaw and Toruń. For centuries it "
    "carried grain to the port of Gdańsk, which made the city rich in the Hanseatic era. Today "
    "much of the river is left in a near-natural state, with sandbanks and islands that shelter "
    "birds, and it floods regularly in spring when snow melts in the mountains."
)

PROMPTS: dict[str, list[ChatMessage] | str] = {
    "chat-greeting": [{"role": "user", "content": "Hi! How are you today?"}],
    "chat-advice": [{"role": "user", "content": "Give me three tips for sleeping better."}],
    "code-python": [
        {"role": "user", "content": "Write a Python function that checks if a number is prime."}
    ],
    "code-sql": [
        {"role": "user", "content": "Write an SQL query that counts orders per customer."}
    ],
    "summary": [
        {"role": "user", "content": f"Summarise this passage in two sentences:\n\n{LONG_PASSAGE}"}
    ],
    "vietnamese": [{"role": "user", "content": "Hãy giới thiệu ngắn gọn về thành phố Hà Nội."}],
    "polish": [{"role": "user", "content": "Opisz krótko, jak zrobić pierogi."}],
    "system-prompt": [
        {"role": "system", "content": "You are a pirate. Answer like one."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    "raw-story": "Once upon a time, in a small village by the sea, there lived",
    "raw-list": "The planets of the solar system, in order from the Sun, are:",
    "raw-repetitive": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,",
}

MAX_TOKENS = 128


@pytest.fixture(scope="module")
def prompt_ids(f32_runtime: Runtime) -> dict[str, list[int]]:
    return {
        name: f32_runtime.chat_prompt(p) if isinstance(p, list) else f32_runtime.text_prompt(p)
        for name, p in PROMPTS.items()
    }


@pytest.fixture(scope="module")
def plain_outputs(f32_runtime: Runtime, prompt_ids: dict[str, list[int]]) -> dict[str, list[int]]:
    assert f32_runtime.engine is not None
    config = GenerationConfig(max_tokens=MAX_TOKENS)
    return {
        name: run_to_end(f32_runtime.engine, ids, config, speculative=False)[0].token_ids
        for name, ids in prompt_ids.items()
    }


def _draft_engine(runtime: Runtime, draft_path: str) -> tuple[SpeculativeEngine, LlamaModel]:
    assert runtime.target is not None
    model = LlamaModel(ModelConfig(draft_path, n_ctx=2048))
    drafter = ModelDrafter(model, runtime.target.n_vocab)
    return SpeculativeEngine(runtime.target, drafter), model


def test_prompt_set_covers_the_required_kinds(prompt_ids: dict[str, list[int]]) -> None:
    assert len(prompt_ids) >= 10
    assert all(len(ids) > 5 for ids in prompt_ids.values())


@pytest.mark.parametrize("draft_name", ["q4_1", "q4_0", "q2_k"])
def test_model_drafts_are_token_identical_to_plain(
    draft_name: str,
    demo_models: Any,
    f32_runtime: Runtime,
    prompt_ids: dict[str, list[int]],
    plain_outputs: dict[str, list[int]],
) -> None:
    engine, model = _draft_engine(f32_runtime, str(getattr(demo_models, draft_name)))
    try:
        config = GenerationConfig(max_tokens=MAX_TOKENS, gamma=fixed(5))
        mismatches = {}
        total_drafted = 0
        for name, ids in prompt_ids.items():
            result, _ = run_to_end(engine, ids, config)
            total_drafted += result.stats.drafted
            if result.token_ids != plain_outputs[name]:
                mismatches[name] = _first_difference(result.token_ids, plain_outputs[name])
        assert mismatches == {}
        assert total_drafted > 0
    finally:
        model.close()


def test_prompt_lookup_is_token_identical_to_plain(
    f32_runtime: Runtime, prompt_ids: dict[str, list[int]], plain_outputs: dict[str, list[int]]
) -> None:
    assert f32_runtime.target is not None
    engine = SpeculativeEngine(f32_runtime.target, PromptLookupDrafter())
    config = GenerationConfig(max_tokens=MAX_TOKENS, gamma=fixed(5))
    accepted = 0
    for name, ids in prompt_ids.items():
        result, _ = run_to_end(engine, ids, config)
        assert result.token_ids == plain_outputs[name], name
        accepted += result.stats.accepted
    # The counting prompt and the summary repeat their context: lookup must have helped.
    assert accepted > 0


def test_identical_draft_is_accepted_almost_always(
    demo_models: Any, f32_runtime: Runtime, prompt_ids: dict[str, list[int]]
) -> None:
    engine, model = _draft_engine(f32_runtime, str(demo_models.f32))
    try:
        config = GenerationConfig(max_tokens=MAX_TOKENS, gamma=fixed(5))
        drafted = accepted = 0
        for name in ("chat-advice", "code-python", "vietnamese"):
            result, _ = run_to_end(engine, prompt_ids[name], config)
            drafted += result.stats.drafted
            accepted += result.stats.accepted
        assert drafted > 100
        assert accepted / drafted >= 0.99
    finally:
        model.close()


def test_round_accounting_agrees(
    demo_models: Any, f32_runtime: Runtime, prompt_ids: dict[str, list[int]]
) -> None:
    engine, model = _draft_engine(f32_runtime, str(demo_models.q4_0))
    try:
        result, events = run_to_end(
            engine,
            prompt_ids["chat-advice"],
            GenerationConfig(max_tokens=MAX_TOKENS, gamma=fixed(4)),
        )
    finally:
        model.close()
    rounds = [e.record for e in events if isinstance(e, RoundEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent) and e.token_id >= 0]
    assert rounds == list(result.rounds)
    for r in rounds[:-1]:
        assert r.emitted == r.accepted + 1
        assert 0 <= r.accepted <= r.drafted <= r.gamma <= 4
    # The first token is drawn from the prompt's pass, before any round.
    assert 1 + sum(r.emitted for r in rounds) == len(tokens) == result.stats.generated_tokens
    stats = result.stats
    assert stats.drafted == sum(r.drafted for r in rounds)
    assert stats.accepted == sum(r.accepted for r in rounds)
    assert stats.rounds == len(rounds)
    # Q4_0 is a mediocre draft: both acceptance and rejection must have happened.
    assert 0 < stats.accepted < stats.drafted
    for i, rate in enumerate(stats.per_position_acceptance, start=1):
        drafted_here = sum(1 for r in rounds if r.drafted >= i)
        accepted_here = sum(1 for r in rounds if r.accepted >= i)
        assert rate == pytest.approx(accepted_here / drafted_here)
    # Tokens flagged as drafts are exactly the accepted ones that reached the reply (an accepted
    # end-of-sequence token ends the reply without being shown).
    assert sum(e.from_draft for e in tokens) == sum(min(r.accepted, r.emitted) for r in rounds)
    assert list(result.draft_token_mask) == [e.from_draft for e in tokens]


def _first_difference(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))

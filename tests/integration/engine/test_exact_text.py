"""Exact greedy replies on text that splits characters across tokens, for every draft source:
Vietnamese, Polish, emoji, CJK, combining marks, code with tabs and odd whitespace, and a long
chat that runs into the end of the context. Each is the plain reply token for token, its text
is plain's, and the text streamed with its tokens (an incremental decoder that holds a
character's first bytes until the rest arrive, across round boundaries) adds up to it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.drafters import ModelDrafter
from app.engine.events import FinishEvent, TokenEvent
from app.engine.gamma import AUTO, OFF, GammaSetting, fixed
from app.engine.hybrid_drafter import HybridDrafter
from app.engine.loop import SpeculativeEngine
from app.engine.result import GenerationResult
from app.engine.runtime import Runtime
from app.engine.suffix_drafter import SuffixDrafter
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from tests.helpers.engine import loaded_runtime

N_CTX = 512
MAX_TOKENS = 48

PROMPTS: dict[str, str] = {
    "vietnamese": "Viết một đoạn ngắn về phở bò Hà Nội, dùng nhiều dấu: ầ ẩ ẫ ậ ệ ữ ự.",
    "polish": "Napisz zdanie: Zażółć gęślą jaźń. Potem wymień pięć polskich miast.",
    "emoji": "Reply using emoji only 🎉🚀👩‍👩‍👧‍👦🇵🇱: how was your day? 😀😃😄",
    "cjk": "请用中文介绍一下东京和北京。日本語でも一文書いてください。한국어도.",
    "combining": "Repeat: e\u0301 a\u0300 n\u0303 o\u0308 Z\u0327 \u1ec7, then say more about "
    "accents.",
    "code-tabs": "Fix the indentation:\n\tdef f(x):\n\t\tif x:\n\t  \t\treturn x\u00a0+ 1\r\n"
    "\t\treturn 0\n\n\n    # odd   spaces\u2003here",
}

# Prompts the demo target answers in characters of more than one byte (it answers the combining
# marks in plain English).
MULTIBYTE_REPLIES = ("vietnamese", "polish", "emoji", "cjk")


@pytest.fixture(scope="module")
def runtime(demo_models: Any) -> Iterator[Runtime]:
    with loaded_runtime(ModelConfig(str(demo_models.f32), n_ctx=N_CTX)) as rt:
        yield rt


@pytest.fixture(scope="module")
def engines(
    demo_models: Any, runtime: Runtime
) -> Iterator[dict[str, tuple[SpeculativeEngine, GammaSetting]]]:
    """Every draft source over the one target, each at the γ it is used at."""
    target = runtime.target
    assert target is not None
    drafts = [LlamaModel(ModelConfig(str(demo_models.q4_1), n_ctx=N_CTX)) for _ in range(2)]
    hybrid = HybridDrafter(SuffixDrafter(), ModelDrafter(drafts[1], target.n_vocab))
    try:
        yield {
            "plain": (SpeculativeEngine(target), OFF),
            "draft model, γ 5": (
                SpeculativeEngine(target, ModelDrafter(drafts[0], target.n_vocab)),
                fixed(5),
            ),
            "suffix index, γ auto": (SpeculativeEngine(target, SuffixDrafter()), AUTO),
            "token trees, γ 12": (SpeculativeEngine(target, SuffixDrafter(trees="on")), fixed(12)),
            "hybrid, γ auto": (SpeculativeEngine(target, hybrid), AUTO),
        }
    finally:
        for model in drafts:
            model.close()


def _reply(
    engine: SpeculativeEngine, ids: list[int], gamma: GammaSetting, max_tokens: int
) -> tuple[GenerationResult, str]:
    """The reply and the text its token events streamed."""
    config = GenerationConfig(max_tokens=max_tokens, gamma=gamma, exact=True)
    events = list(engine.generate(ids, config))
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    return finish.result, "".join(e.text for e in events if isinstance(e, TokenEvent))


def _check_every_source(
    engines: dict[str, tuple[SpeculativeEngine, GammaSetting]], ids: list[int], max_tokens: int
) -> GenerationResult:
    plain_engine, off = engines["plain"]
    plain, streamed = _reply(plain_engine, ids, off, max_tokens)
    assert streamed == plain.text
    drafted = 0
    for label, (engine, gamma) in engines.items():
        result, streamed = _reply(engine, ids, gamma, max_tokens)
        assert result.token_ids == plain.token_ids, label
        assert result.finish_reason == plain.finish_reason, label
        assert result.text == plain.text, label
        assert streamed == result.text, label
        drafted += result.stats.drafted
    assert drafted > 0
    return plain


@pytest.mark.parametrize("name", PROMPTS)
def test_exact_greedy_text_is_plain_for_every_draft_source(
    runtime: Runtime, engines: dict[str, tuple[SpeculativeEngine, GammaSetting]], name: str
) -> None:
    ids = runtime.chat_prompt([{"role": "user", "content": PROMPTS[name]}])
    plain = _check_every_source(engines, ids, MAX_TOKENS)
    if name in MULTIBYTE_REPLIES:
        # The streamed pieces had to join characters of more than one byte across tokens.
        assert any(ord(ch) > 0x7F for ch in plain.text), plain.text


def test_a_long_chat_reaching_the_context_end_is_plain_for_every_draft_source(
    runtime: Runtime, engines: dict[str, tuple[SpeculativeEngine, GammaSetting]]
) -> None:
    """A conversation whose reply is cut by the context's end, not by its length: the drafts
    are cut by the room left, and every source ends where plain decoding does."""
    ask: list[ChatMessage] = [
        {"role": "user", "content": "Now list every number you named so far, with its word."}
    ]
    turns: list[ChatMessage] = []
    for i in range(64):
        more: list[ChatMessage] = [
            *turns,
            {"role": "user", "content": f"Name the number {i * 7} and a Polish word: żółw {i}."},
            {"role": "assistant", "content": f"{i * 7}: żółw 🐢 means turtle, number {i}."},
        ]
        if len(runtime.chat_prompt([*more, *ask])) > N_CTX - 24:
            break
        turns = more
    ids = runtime.chat_prompt([*turns, *ask])
    assert N_CTX - 48 < len(ids) <= N_CTX - 24
    plain = _check_every_source(engines, ids, MAX_TOKENS)
    assert plain.finish_reason == "context"
    # The last token is emitted but never needs a cache cell.
    assert len(ids) + len(plain.token_ids) == N_CTX + 1

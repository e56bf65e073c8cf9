"""A model file without a chat template is chatted with in the turn format its vocabulary was
trained on: the real Gemma 3 270M file (no template) gets Gemma's `<start_of_turn>` turns,
never ChatML markup it cannot read as control tokens."""

from __future__ import annotations

from pathlib import Path

from app.engine.builtin_templates import CHATML, GEMMA, UNTRAINED_CHATML, builtin_template
from app.engine.chat_template import ChatMessage, render_chat
from app.engine.config import GenerationConfig
from app.llama.config import ModelConfig
from tests.helpers.engine import loaded_runtime, run_to_end

CHAT: list[ChatMessage] = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Hi, who are you?"},
]


def test_gemma_turns_fold_the_system_prompt_into_the_first_user_turn() -> None:
    text = render_chat(GEMMA.jinja, CHAT, bos_token="<bos>")
    assert text == (
        "<bos><start_of_turn>user\nAnswer briefly.\n\nHi, who are you?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_the_format_follows_the_vocabularys_control_tokens() -> None:
    assert builtin_template({"<start_of_turn>", "<end_of_turn>"}.__contains__) is GEMMA
    assert builtin_template({"<|im_start|>", "<|im_end|>"}.__contains__) is CHATML
    unknown = builtin_template(lambda _marker: False)
    assert unknown is UNTRAINED_CHATML and not unknown.trained


def test_gemma_without_a_template_is_prompted_and_answers_in_its_own_format(
    gemma_model: Path,
) -> None:
    with loaded_runtime(ModelConfig(str(gemma_model), n_ctx=512, n_threads=1)) as runtime:
        target = runtime.target
        assert target is not None and not target.meta("tokenizer.chat_template")
        ids = runtime.chat_prompt(CHAT)
        start_of_turn = target.tokenize("<start_of_turn>", add_special=False, parse_special=True)
        assert len(start_of_turn) == 1 and ids.count(start_of_turn[0]) == 2
        assert "<|im_start|>" not in target.detokenize(ids, special=True)
        assert runtime.engine is not None
        result, _events = run_to_end(
            runtime.engine,
            ids,
            GenerationConfig(max_tokens=24),
        )
        assert "<|im_end|>" not in result.text and "<|im_start|>" not in result.text
        assert result.text.strip()

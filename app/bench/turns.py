"""A benchmark prompt's ids, its earlier turns answered first, the same for every configuration."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from app.bench.prompts import BenchPrompt
from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.events import FinishEvent
from app.engine.gamma import OFF
from app.engine.runtime import Runtime


def prompt_ids_for(
    runtime: Runtime, prompts: Sequence[BenchPrompt], base: GenerationConfig | None = None
) -> list[list[int]]:
    """Each prompt's ids. Earlier turns a prompt names (`before`, `recall`) are answered first
    by plain greedy decoding, untimed and the same for every configuration; the `recall`
    exchanges go into the runtime's past-chats index, which stays as it is while the runs go."""
    context = replace(base or GenerationConfig(), gamma=OFF, sampling=SamplingConfig())
    out: list[list[int]] = []
    for p in prompts:
        if not p.chat:
            out.append(runtime.text_prompt(p.text))
            continue
        for question in p.recall:
            asked = runtime.chat_prompt([{"role": "user", "content": question}])
            runtime.remember(asked, _reply_ids(runtime, asked, context))
        messages: list[ChatMessage] = []
        for question in p.before:
            messages.append({"role": "user", "content": question})
            reply = _reply_ids(runtime, runtime.chat_prompt(messages), context)
            assert runtime.target is not None
            messages.append({"role": "assistant", "content": runtime.target.detokenize(reply)})
        messages.append({"role": "user", "content": p.text})
        out.append(runtime.chat_prompt(messages))
    return out


def _reply_ids(runtime: Runtime, prompt_ids: list[int], config: GenerationConfig) -> list[int]:
    for event in runtime.generate(prompt_ids, config):
        if isinstance(event, FinishEvent):
            return list(event.result.token_ids)
    raise AssertionError("a generation always ends with a FinishEvent")

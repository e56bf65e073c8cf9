"""Render a conversation with the target model's own chat template (GGUF tokenizer.chat_template).

Templates come from downloaded files, so they run in Jinja's immutable sandbox: a template can
format text but cannot reach Python objects or the file system.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import TypedDict

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.errors import InvalidSettingError

# Used only when a GGUF carries no template at all: ChatML, the most common instruct format.
FALLBACK_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class ChatMessage(TypedDict):
    role: str
    content: str


def _raise(message: str) -> None:
    raise TemplateError(message)


def render_chat(
    template: str | None,
    messages: Sequence[ChatMessage],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: date.today().strftime(fmt)
    try:
        compiled = env.from_string(template or FALLBACK_TEMPLATE)
        return compiled.render(
            messages=list(messages),
            bos_token=bos_token,
            eos_token=eos_token,
            add_generation_prompt=add_generation_prompt,
        )
    except TemplateError as exc:
        raise InvalidSettingError(f"the model's chat template failed: {exc}") from exc

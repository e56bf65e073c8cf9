"""Chat formats for model files that carry no chat template, recognised by the control tokens
their vocabulary holds (llama.cpp names the same formats in its built-in list: gemma, llama3,
chatml).

A model answers well only in the turn format it was trained on: Gemma's vocabulary has
`<start_of_turn>`, Llama 3's `<|start_header_id|>`, ChatML models' `<|im_start|>`. A file
whose vocabulary holds none of them gets ChatML as the last resort, and the window says so
(`BuiltinTemplate.trained` is False).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BuiltinTemplate:
    name: str  # llama.cpp's name for the format
    markers: tuple[str, ...]  # control tokens a vocabulary trained on it holds
    jinja: str
    trained: bool = True  # False: no marker matched, the model may not know this format


# Gemma has no system turn: a system prompt opens the first user turn.
GEMMA = BuiltinTemplate(
    "gemma",
    ("<start_of_turn>", "<end_of_turn>"),
    "{{ bos_token }}{% set ns = namespace(system='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set ns.system = ns.system + message['content'] %}"
    "{% else %}<start_of_turn>{{ 'model' if message['role'] == 'assistant' else 'user' }}\n"
    "{% if ns.system and message['role'] != 'assistant' %}{{ ns.system }}\n\n"
    "{% set ns.system = '' %}{% endif %}{{ message['content'] | trim }}<end_of_turn>\n"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}",
)

LLAMA3 = BuiltinTemplate(
    "llama3",
    ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
)

_CHATML_JINJA = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CHATML = BuiltinTemplate("chatml", ("<|im_start|>", "<|im_end|>"), _CHATML_JINJA)
# ChatML for a vocabulary that knows none of the formats above: the most common instruct
# format, and a guess.
UNTRAINED_CHATML = BuiltinTemplate("chatml", (), _CHATML_JINJA, trained=False)

BUILTIN_TEMPLATES = (GEMMA, LLAMA3, CHATML)


def builtin_template(is_control_token: Callable[[str], bool]) -> BuiltinTemplate:
    """The format whose every marker the vocabulary holds as one control token."""
    for template in BUILTIN_TEMPLATES:
        if all(is_control_token(marker) for marker in template.markers):
            return template
    return UNTRAINED_CHATML

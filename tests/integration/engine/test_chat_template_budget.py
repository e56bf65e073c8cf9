"""Hostile chat templates end with one readable error, bounded in steps and memory; Stop ends
a render early; ordinary templates render exactly as before."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from app.engine.chat_template import ChatMessage, render_chat
from app.errors import Cancelled, InvalidSettingError

USER: list[ChatMessage] = [{"role": "user", "content": "hi"}]
# Far below the default so the runaway cases end in a fraction of a second, even on a busy CPU.
STEPS = 50_000

HOSTILE = {
    "nested ranges": "{% for a in range(100000) %}{% for b in range(100000) %}"
    "{% endfor %}{% endfor %}",
    "nested lists": "{% set l = range(1000)|list %}{% for a in l %}{% for b in l %}"
    "{% for c in l %}{% endfor %}{% endfor %}{% endfor %}",
    "huge repeat": "{{ 'x' * 10**10 }}",
    "huge list repeat": "{{ [1, 2] * 10**9 }}",
    "huge range": "{% for a in range(10**9) %}{% endfor %}",
    "infinite recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "exponential recursion": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
    "{% endmacro %}{{ f(60) }}",
    "doubling concat": "{% set ns = namespace(s='x') %}{% for i in range(64) %}"
    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
    "replace blow-up": "{% set ns = namespace(s='xx') %}{% for i in range(64) %}"
    "{% set ns.s = ns.s.replace('x', 'xxxxxxxx') %}{% endfor %}",
    "replace filter blow-up": "{% set ns = namespace(s='xx') %}{% for i in range(64) %}"
    "{% set ns.s = ns.s|replace('x', 'xxxxxxxx') %}{% endfor %}",
    "percent width": "{{ '%1000000000s' % 'x' }}",
    "format width": "{{ '{:1000000000}'.format('x') }}",
    "format filter width": "{{ '%1000000000s'|format('x') }}",
    "ljust": "{{ 'x'.ljust(10**10) }}",
    "center filter": "{{ 'x'|center(10**10) }}",
    "huge power": "{{ 7 ** 100000000 }}",
    "buffered output": "{% set s %}{% for i in range(100000) %}{{ 'y' * 100000 }}{% endfor %}"
    "{% endset %}{{ s|length }}",
    "streamed output": "{% for i in range(100000) %}{{ 'z' * 100000 }}{% endfor %}",
    "join of one long string": "{% set s = 'x' * 1000000 %}{{ ([s] * 1000000) | join }}",
    "str.join of one long string": "{% set s = 'x' * 1000000 %}{{ ''.join([s] * 1000000) }}",
    "long separator": "{{ ('x' * 1000000).join(range(1000) | map('string') | list) }}",
    "long join filter separator": "{{ range(1000) | join('x' * 1000000) }}",
    "printed list": "{% set s = 'x' * 1000000 %}{{ [s] * 1000000 }}",
    "many operands": "{% set s = 'x' * 1000000 %}{{ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s }}",
    "percent of many": "{% set s = 'x' * 1000000 %}{{ '%s%s%s%s%s' % (s, s, s, s, s) }}",
    "lipsum": "{{ lipsum(n=1000000) }}",
    "division by zero": "{{ 1 / 0 }}",
    "syntax error": "{% for %}",
    "raise_exception": "{{ raise_exception('only user and assistant roles') }}",
}


@pytest.mark.parametrize("template", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_template_ends_with_one_line_error_and_bounded_memory(template: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(InvalidSettingError) as caught:
            render_chat(template, USER, max_steps=STEPS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert message.startswith("the model's chat template failed: ")
    assert "\n" not in message
    assert "out of memory" not in message  # refused by a limit, not by luck
    assert peak < 64 * 1024 * 1024, f"peak Python allocation {peak} bytes"


def test_the_step_budget_is_what_ends_a_runaway_loop() -> None:
    with pytest.raises(InvalidSettingError, match=f"more than {STEPS} steps"):
        render_chat(HOSTILE["nested ranges"], USER, max_steps=STEPS)


def test_the_deadline_ends_a_render_whatever_the_step_count() -> None:
    with pytest.raises(InvalidSettingError, match=r"longer than 0\.01 s"):
        render_chat(HOSTILE["exponential recursion"], USER, max_seconds=0.01)


def test_stop_ends_a_runaway_render_as_cancelled_not_as_an_error() -> None:
    polls = 0

    def should_stop() -> bool:
        nonlocal polls
        polls += 1
        return polls > 3

    with pytest.raises(Cancelled):
        render_chat(HOSTILE["nested ranges"], USER, should_stop=should_stop)
    assert polls == 4


def test_an_ordinary_conversation_renders_exactly() -> None:
    messages: list[ChatMessage] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi " * 50_000},  # a long paste is not a hostile template
        {"role": "assistant", "content": "Hello."},
    ]
    text = render_chat(None, messages)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        f"<|im_start|>user\n{'Hi ' * 50_000}<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_loops_macros_and_filters_of_real_templates_still_work() -> None:
    template = (
        "{% macro role(m) %}{{ m['role'] | upper }}{% endmacro %}"
        "{% for m in messages %}{% if loop.first %}[{{ loop.length }}]{% endif %}"
        "{{ role(m) }}:{{ m['content'] | trim }}|{{ '%-3s' % loop.index }}{% endfor %}"
        "{{ '{}!'.format(bos_token) }}{{ (messages | map(attribute='role') | join(',')) ~ '.' }}"
    )
    messages: list[ChatMessage] = [
        {"role": "user", "content": " a "},
        {"role": "assistant", "content": "b"},
    ]
    text = render_chat(template, messages, bos_token="<s>")
    assert text == "[2]USER:a|1  ASSISTANT:b|2  <s>!user,assistant."


def _plain_jinja(template: str, messages: list[ChatMessage]) -> str:
    """The same template rendered by Jinja's own sandbox, without any budget."""
    from datetime import date

    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["strftime_now"] = lambda fmt: date.today().strftime(fmt)
    return env.from_string(template).render(
        messages=messages, bos_token="<bos>", eos_token="<eos>", add_generation_prompt=True
    )


GEMMA_STYLE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{% set first_user_prefix = messages[0]['content'] + '\\n\\n' %}"
    "{% set loop_messages = messages[1:] %}{% else %}{% set first_user_prefix = '' %}"
    "{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate') }}{% endif %}"
    "{% if message['role'] == 'assistant' %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)
LLAMA_STYLE = (
    "{% set ns = namespace(system='') %}{% for m in messages %}{% if m.role == 'system' %}"
    "{% set ns.system = m.content | trim %}{% endif %}{% endfor %}{{ bos_token }}"
    "{% if ns.system %}<|start_header_id|>system<|end_header_id|>\n\n{{ ns.system }}"
    "<|eot_id|>{% endif %}{% for m in messages if m.role != 'system' %}"
    "{{ '<|start_header_id|>' ~ m.role ~ '<|end_header_id|>\\n\\n' ~ (m.content | trim) "
    "~ '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def test_real_model_templates_render_exactly_as_jinja_renders_them(demo_models: Any) -> None:
    from models.gguf import inspect_gguf

    conversation: list[ChatMessage] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "  Hi <b>there</b>  "},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "And now?"},
    ]
    smollm2 = inspect_gguf(demo_models.f32).chat_template
    assert smollm2
    for template in (smollm2, GEMMA_STYLE, LLAMA_STYLE):
        rendered = render_chat(template, conversation, bos_token="<bos>", eos_token="<eos>")
        assert rendered == _plain_jinja(template, conversation)
        assert "Hi <b>there</b>" in rendered

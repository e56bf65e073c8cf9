"""Render a conversation with the target model's own chat template (GGUF tokenizer.chat_template).

Templates come from downloaded files, so they run in a budgeted Jinja sandbox
(app/engine/template_sandbox.py): a template can format text but cannot reach Python objects or
the file system, and cannot run for long, allocate without bound or outlive a Stop.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Sequence
from datetime import date
from typing import Any, NotRequired, TypedDict

from jinja2 import Template, TemplateError

from app.engine.builtin_templates import UNTRAINED_CHATML
from app.engine.template_sandbox import Budget, BudgetedSandbox
from app.errors import Cancelled, InvalidSettingError

# A real chat template renders in milliseconds with a few thousand steps; these limits are far
# above that and far below what a hostile template needs to hang or exhaust memory.
MAX_TEMPLATE_STEPS = 1_000_000
MAX_TEMPLATE_SECONDS = 5.0
# The rendered prompt may hold every message plus the template's markup: allow generous room.
MIN_TEMPLATE_CHARS = 1 << 20

# Used when a GGUF carries no template and nobody chose one: ChatML, the most common format.
# chat_prompt_ids picks the format the vocabulary was trained on (app/engine/builtin_templates).
FALLBACK_TEMPLATE = UNTRAINED_CHATML.jinja


class ChatMessage(TypedDict):
    role: str
    content: str
    # An assistant turn's earlier calls, in OpenAI's shape with `arguments` parsed (HF's
    # convention: templates write them with `tojson`).
    tool_calls: NotRequired[list[dict[str, Any]]]
    tool_call_id: NotRequired[str]  # a "tool" turn: the call it answers


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """HF transformers' `tojson`, which chat templates are written against: plain JSON, unlike
    Jinja's own filter, which escapes `<`, `>`, `&` and `'` for HTML."""
    # The indent is repeated on every line of the output, before the size meter sees it.
    if isinstance(indent, int | str) and not isinstance(indent, bool) and len(str(indent)) > 2:
        raise TemplateError("tojson's indent must be under 100")
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise(message: str) -> None:
    raise TemplateError(message)


def render_chat(
    template: str | None,
    messages: Sequence[ChatMessage],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
    tools: Sequence[dict[str, Any]] | None = None,
    should_stop: Callable[[], bool] | None = None,
    max_steps: int = MAX_TEMPLATE_STEPS,
    max_seconds: float = MAX_TEMPLATE_SECONDS,
) -> str:
    """The prompt text; InvalidSettingError (one line) if the template fails or runs away.

    `should_stop` is polled while the template runs; when it turns True the render ends with
    Cancelled, so Stop and closing the window never wait for a hostile template.
    `tools`: the functions a reply may call, in OpenAI's shape, for templates that render them.
    """
    input_chars = len(json.dumps([list(messages), tools or []], ensure_ascii=False))
    budget = Budget(
        max_chars=max(MIN_TEMPLATE_CHARS, 4 * input_chars),
        max_steps=max_steps,
        deadline_s=max_seconds,
        should_stop=should_stop,
    )
    pieces: list[str] = []
    variables: dict[str, Any] = {
        "messages": list(messages),
        "bos_token": bos_token,
        "eos_token": eos_token,
        "add_generation_prompt": add_generation_prompt,
    }
    if tools:
        variables["tools"] = list(tools)
    try:
        with _rendering:  # one render at a time meters against each compiled template's sandbox
            env, compiled = _compiled(template or FALLBACK_TEMPLATE)
            env.budget = budget
            budget.start()
            for piece in compiled.generate(**variables):
                pieces.append(piece)
        return "".join(pieces)
    except Cancelled:
        raise
    # Anything a template does wrong is the model file's fault, not a bug here: the user gets
    # one line naming it: RecursionError (deep macros), MemoryError, TemplateError, and so on.
    except Exception as exc:
        raise InvalidSettingError(f"the model's chat template failed: {_reason(exc)}") from None


_rendering = threading.Lock()


@functools.lru_cache(maxsize=8)
def _compiled(template: str) -> tuple[BudgetedSandbox, Template]:
    """A template compiled once, with its sandbox: compiling costs about 3 ms, which a rebuild
    of the past-chats index paid for every stored exchange. Each render gives the sandbox its
    own budget. A template that fails to compile raises, and is not kept."""
    # Compiling folds constant filters, metered as a render's: against a budget of its own.
    compiling = Budget(MIN_TEMPLATE_CHARS, MAX_TEMPLATE_STEPS, MAX_TEMPLATE_SECONDS)
    compiling.start()
    env = BudgetedSandbox(compiling, {"tojson": _tojson}, trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: date.today().strftime(fmt)
    return env, env.from_string(template)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "it recursed too deeply"
    if isinstance(exc, MemoryError):
        return "it ran out of memory"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text[:200] or type(exc).__name__

"""Request bodies of /v1/chat/completions and /v1/completions, checked field by field.

Every problem becomes an ApiError naming the field, so a client sees one clear 400 instead of
a traceback. Types and finiteness are checked here; the engine's own ranges (top_p, min_p,
p_min, max_tokens...) are checked by GenerationConfig.validate(), their one home. Fields that
ask for a feature the server lacks are refused (app.server.unsupported); other unknown fields
are ignored, as OpenAI-compatible servers do, because clients send many optional ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from app.engine.chat_template import ChatMessage
from app.engine.config import MAX_SEED, MAX_TOP_LOGPROBS, GenerationConfig
from app.engine.gamma import GammaSetting, parse_gamma
from app.engine.job_driver import Job
from app.engine.tool_calls import DESCRIBED, ToolDialect
from app.errors import InvalidSettingError, SettingValueError
from app.metrics.cost_model import MAX_GAMMA
from app.server.chat_input import read_messages, read_prompt
from app.server.errors import ApiError, finite, finite_number, invalid, refused
from app.server.tools import ToolRequest, parse_tools, reply_constraint
from app.server.unsupported import refuse_unsupported

_T = TypeVar("_T")

AUTO: Literal["auto"] = "auto"
NMax = int | Literal["auto"]
# OpenAI's own bounds for these two; the engine accepts any temperature >= 0.
MAX_TEMPERATURE = 2.0
MAX_STOPS = 8
# A logit_bias key longer than this names no token (ids are int32) and is refused unread:
# int() would give up past 4300 digits.
MAX_TOKEN_ID_DIGITS = 100


def n_max_of(setting: GammaSetting) -> NMax:
    """A γ setting in llama-server's spelling of `speculative.n_max`: 0 is off."""
    if setting.is_auto:
        return AUTO
    return setting.length


@dataclass(frozen=True, slots=True)
class Defaults:
    """The server's settings for fields a request leaves out (from `specchat serve` flags)."""

    config: GenerationConfig
    n_max: NMax
    tool_dialect: ToolDialect = DESCRIBED  # the served model's, from its chat template
    # False when the server has nothing to draft from (`serve --draft none`): every request
    # then decodes plainly, and says so when it asked for speculation.
    drafts: bool = True


@dataclass(frozen=True, slots=True)
class ApiRequest:
    """One parsed completion request: a chat (messages) or a raw text prompt."""

    messages: tuple[ChatMessage, ...] | None
    prompt: str | None
    config: GenerationConfig
    n_max: NMax
    stream: bool
    include_usage: bool
    stops: tuple[str, ...]
    tools: ToolRequest | None = None
    # What the server did otherwise than the request asked, for its `speculation.notices`.
    notices: tuple[str, ...] = ()

    @property
    def speculative(self) -> bool:
        return self.n_max != 0

    def job(self) -> Job:
        """The engine's job. A raw prompt's special-token text reads as those tokens, as
        llama-server reads it: a raw prompt has no roles to forge, while a chat message's text
        stays text (app/engine/chat_prompt.py)."""
        tools = None if self.tools is None else self.tools.offer()
        specials = self.prompt is not None
        return Job(self.config, self.messages, self.prompt, tools, prompt_specials=specials)


# The request field that sets each GenerationConfig (and SamplingConfig) field; repeat_last_n
# is a server flag only.
_REQUEST_FIELDS = {
    "max_tokens": "max_tokens",
    # A grammar llama.cpp cannot parse: the client's own `grammar`, nearly always (a schema's
    # is checked field by field before it is written: app/server/string_patterns.py).
    "constraint": "grammar",
    "p_min": "speculative.p_min",
    **{
        name: name
        for name in (
            "temperature",
            "top_k",
            "top_p",
            "min_p",
            "repeat_penalty",
            "seed",
            "presence_penalty",
            "frequency_penalty",
            "logit_bias",
        )
    },
}


def request_param(
    error: SettingValueError, *, chat: bool, fields: Mapping[str, Any] | None = None
) -> str | None:
    """The request field a refused engine setting came from, as `param` names it: the one
    the client sent where two spell it (max_completion_tokens or max_tokens)."""
    if error.setting == "logprobs":
        return "top_logprobs" if chat else "logprobs"
    if error.setting == "max_tokens" and (fields or {}).get("max_completion_tokens") is not None:
        return "max_completion_tokens"
    return _REQUEST_FIELDS.get(error.setting)


def parse_chat(body: Any, defaults: Defaults) -> ApiRequest:
    fields = _object(body)
    messages = read_messages(fields.get("messages"))
    return _request(fields, defaults, messages=messages, prompt=None)


def parse_completion(body: Any, defaults: Defaults) -> ApiRequest:
    fields = _object(body)
    return _request(fields, defaults, messages=None, prompt=read_prompt(fields.get("prompt")))


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_request")
    return body


def _request(
    fields: dict[str, Any],
    defaults: Defaults,
    *,
    messages: tuple[ChatMessage, ...] | None,
    prompt: str | None,
) -> ApiRequest:
    refuse_unsupported(fields)
    tools = parse_tools(fields, chat=messages is not None, dialect=defaults.tool_dialect)
    n = _integer(fields, "n")
    if n is not None and n != 1:
        raise invalid("n", "only n = 1 is supported")
    base = defaults.config
    temperature = _number(fields, "temperature")
    if temperature is not None and not 0.0 <= temperature <= MAX_TEMPERATURE:
        raise invalid("temperature", f"'temperature' must be between 0 and {MAX_TEMPERATURE:g}")
    sampling = replace(
        base.sampling,
        temperature=_pick(temperature, base.sampling.temperature),
        top_p=_pick(_number(fields, "top_p"), base.sampling.top_p),
        top_k=_pick(_integer(fields, "top_k"), base.sampling.top_k),
        min_p=_pick(_number(fields, "min_p"), base.sampling.min_p),
        repeat_penalty=_pick(_number(fields, "repeat_penalty"), base.sampling.repeat_penalty),
        seed=_seed(fields, base.sampling.seed),
        presence_penalty=_pick(_number(fields, "presence_penalty"), base.sampling.presence_penalty),
        frequency_penalty=_pick(
            _number(fields, "frequency_penalty"), base.sampling.frequency_penalty
        ),
        logit_bias=_logit_bias(fields.get("logit_bias"), base.sampling.logit_bias),
    )
    max_tokens = _integer(fields, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _integer(fields, "max_tokens")
    n_max, p_min = _speculative(fields.get("speculative"), defaults)
    notices: tuple[str, ...] = ()
    if not defaults.drafts:
        if n_max != 0:
            notices = (
                f"speculative.n_max {n_max} was not used: the server has no draft (--draft "
                "none, or Draft: None in the window), so it decoded plainly",
            )
        n_max = 0
    config = replace(
        base,
        max_tokens=_pick(max_tokens, base.max_tokens),
        gamma=parse_gamma(n_max),
        p_min=_pick(p_min, base.p_min),
        sampling=sampling,
        constraint=reply_constraint(fields, tools),
        logprobs=_logprobs(fields, chat=messages is not None),
    )
    try:
        config.validate()
    except SettingValueError as exc:
        param = request_param(exc, chat=messages is not None, fields=fields)
        raise refused(exc, param=param) from None
    except InvalidSettingError as exc:
        raise refused(exc) from None
    return ApiRequest(
        messages=messages,
        prompt=prompt,
        config=config,
        n_max=n_max,
        stream=_boolean(fields, "stream", default=False),
        include_usage=_include_usage(fields.get("stream_options")),
        stops=_stops(fields.get("stop")),
        tools=tools,
        notices=notices,
    )


def _pick(value: _T | None, default: _T) -> _T:
    return default if value is None else value


# -- fields ---------------------------------------------------------------------------------------


def _number(fields: dict[str, Any], name: str) -> float | None:
    return finite_number(fields.get(name), name, f"'{name}'")


def _integer(fields: dict[str, Any], name: str) -> int | None:
    value = fields.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(name, f"'{name}' must be an integer", code="invalid_type")
    return value


def _boolean(fields: dict[str, Any], name: str, *, default: bool) -> bool:
    value = fields.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(name, f"'{name}' must be true or false", code="invalid_type")
    return value


def _logprobs(fields: dict[str, Any], *, chat: bool) -> int | None:
    """How many alternatives per token to report, None for no log probabilities: chat asks with
    `logprobs: true` and `top_logprobs: n`, the legacy completions with `logprobs: n`."""
    name = "top_logprobs" if chat else "logprobs"
    top = _integer(fields, name)
    if top is not None and not 0 <= top <= MAX_TOP_LOGPROBS:
        raise invalid(name, f"'{name}' must be between 0 and {MAX_TOP_LOGPROBS}")
    if not chat:
        return top
    if not _boolean(fields, "logprobs", default=False):
        if top:
            raise invalid(name, "'top_logprobs' needs 'logprobs': true")
        return None
    return top or 0


def _seed(fields: dict[str, Any], default: int | None) -> int | None:
    seed = _integer(fields, "seed")
    if seed is None:
        return default
    if seed == -1:  # llama-server's spelling of "a fresh random seed"
        return None
    if not 0 <= seed <= MAX_SEED:
        raise invalid("seed", f"'seed' must be -1 (random) or between 0 and {MAX_SEED}")
    return seed


def _speculative(value: Any, defaults: Defaults) -> tuple[NMax, float | None]:
    if value is None:
        return (defaults.n_max if defaults.drafts else 0), None
    if not isinstance(value, dict):
        raise invalid("speculative", "'speculative' must be an object", code="invalid_type")
    n_max: NMax = defaults.n_max
    raw = value.get("n_max")
    if raw == AUTO:
        n_max = AUTO
    elif raw is not None:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise invalid(
                "speculative.n_max",
                "'speculative.n_max' must be an integer or \"auto\"",
                code="invalid_type",
            )
        if not 0 <= raw <= MAX_GAMMA:
            raise invalid(
                "speculative.n_max",
                f"'speculative.n_max' must be between 0 (off) and {MAX_GAMMA}, or \"auto\"",
            )
        n_max = raw
    p_min = finite_number(value.get("p_min"), "speculative.p_min", "'speculative.p_min'")
    return n_max, p_min


def _logit_bias(
    value: Any, default: tuple[tuple[int, float], ...]
) -> tuple[tuple[int, float], ...]:
    if value is None:
        return default
    message = "'logit_bias' must map token ids (as strings) to numbers"
    if not isinstance(value, dict):
        raise invalid("logit_bias", message, code="invalid_type")
    pairs = []
    for key, bias in value.items():
        if not _is_token_id(key) or isinstance(bias, bool):
            raise invalid("logit_bias", message, code="invalid_type")
        if not isinstance(bias, int | float):
            raise invalid("logit_bias", message, code="invalid_type")
        pairs.append((int(key), finite(bias, "logit_bias", "'logit_bias' values")))
    return tuple(sorted(pairs))


def _is_token_id(key: object) -> bool:
    # ASCII digits only: str.isdigit() also admits "²" and other digits int() refuses.
    return (
        isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= MAX_TOKEN_ID_DIGITS
    )


def _include_usage(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, dict):
        raise invalid("stream_options", "'stream_options' must be an object", code="invalid_type")
    return _boolean(value, "include_usage", default=False)


def _stops(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        message = "'stop' must be a string or a list of strings"
        raise invalid("stop", message, code="invalid_type")
    if len(stops) > MAX_STOPS:
        raise invalid("stop", f"'stop' takes at most {MAX_STOPS} strings")
    # An empty string stops nothing, as OpenAI reads it (clients send "" for "no stop").
    return tuple(s for s in stops if s)

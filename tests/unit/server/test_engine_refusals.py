"""Settings the engine refuses (GenerationConfig.validate) come back as a 400 naming the request
field; seeds are taken as OpenAI's clients send them, up to 2^63 - 1."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.config import GenerationConfig
from app.server.errors import ApiError
from app.server.schemas import ApiRequest, Defaults, parse_chat, parse_completion

DEFAULTS = Defaults(GenerationConfig(), 4)
HI = [{"role": "user", "content": "hi"}]
INT64_MAX = 2**63 - 1  # the largest seed a signed 64-bit JSON client sends


def chat(**fields: Any) -> ApiRequest:
    return parse_chat({"messages": HI, **fields}, DEFAULTS)


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
        ({"top_p": -0.1}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"min_p": 1}, "min_p"),
        ({"repeat_penalty": 0}, "repeat_penalty"),
        ({"repeat_penalty": 1e-300}, "repeat_penalty"),
        ({"repeat_penalty": 1e300}, "repeat_penalty"),
        ({"presence_penalty": 3}, "presence_penalty"),
        ({"frequency_penalty": -2.5}, "frequency_penalty"),
        ({"logit_bias": {"5": 101}}, "logit_bias"),
        ({"logit_bias": {"99999999999999999999999": 1}}, "logit_bias"),
        ({"speculative": {"p_min": 1.5}}, "speculative.p_min"),
    ],
)
def test_an_engine_refusal_names_the_request_field(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(ApiError) as caught:
        chat(**fields)
    error = caught.value
    assert (error.status, error.param, error.code) == (400, param, "invalid_value")


def test_a_completion_refusal_names_its_field_too() -> None:
    with pytest.raises(ApiError) as caught:
        parse_completion({"prompt": "a", "top_p": 1.5}, DEFAULTS)
    assert caught.value.param == "top_p"


def test_top_p_zero_is_taken_as_openai_documents_it() -> None:
    # OpenAI's range is [0, 1], and some of its clients send 0: the most likely token alone.
    assert chat(top_p=0).config.sampling.top_p == 0.0
    assert parse_completion({"prompt": "a", "top_p": 0.0}, DEFAULTS).config.sampling.top_p == 0.0


@pytest.mark.parametrize("seed", [2**32, 2**40, INT64_MAX])
def test_a_64_bit_seed_reaches_the_engine_as_sent(seed: int) -> None:
    assert chat(seed=seed).config.sampling.seed == seed


def test_a_seed_past_the_signed_64_bit_range_is_refused_naming_it() -> None:
    with pytest.raises(ApiError) as caught:
        chat(seed=INT64_MAX + 1)
    assert caught.value.param == "seed"
    assert str(INT64_MAX) in caught.value.message

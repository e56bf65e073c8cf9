"""`logprobs` / `top_logprobs` as requests spell them, and the shapes OpenAI answers in."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.config import GenerationConfig
from app.engine.logprobs import TokenChoice, TokenLogprob
from app.server.errors import ApiError
from app.server.logprob_format import CompletionLogprobs, chat_logprobs
from app.server.schemas import ApiRequest, Defaults, parse_chat, parse_completion

DEFAULTS = Defaults(GenerationConfig(), 0)
HI = [{"role": "user", "content": "hi"}]


def chat(**fields: Any) -> ApiRequest:
    return parse_chat({"messages": HI, **fields}, DEFAULTS)


def refused(**fields: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        chat(**fields)
    assert caught.value.status == 400
    return caught.value


def test_chat_asks_with_logprobs_true_and_top_logprobs() -> None:
    assert chat().config.logprobs is None
    assert chat(logprobs=False, top_logprobs=0).config.logprobs is None
    assert chat(logprobs=True).config.logprobs == 0
    assert chat(logprobs=True, top_logprobs=5).config.logprobs == 5


def test_chat_refuses_what_openai_refuses() -> None:
    assert refused(top_logprobs=3).param == "top_logprobs"
    assert refused(logprobs=True, top_logprobs=21).param == "top_logprobs"
    assert refused(logprobs=3).param == "logprobs"


def test_legacy_completions_ask_with_a_number() -> None:
    assert parse_completion({"prompt": "a"}, DEFAULTS).config.logprobs is None
    assert parse_completion({"prompt": "a", "logprobs": 2}, DEFAULTS).config.logprobs == 2
    with pytest.raises(ApiError):
        parse_completion({"prompt": "a", "logprobs": True}, DEFAULTS)


HELLO = TokenLogprob(
    TokenChoice(5, -0.5, b"Hi"),
    (TokenChoice(5, -0.5, b"Hi"), TokenChoice(6, float("-inf"), b"\xe2")),
)


def test_chat_entries_are_shaped_as_openai_shapes_them() -> None:
    assert chat_logprobs([HELLO]) == {
        "content": [
            {
                "token": "Hi",
                "logprob": -0.5,
                "bytes": [72, 105],
                "top_logprobs": [
                    {"token": "Hi", "logprob": -0.5, "bytes": [72, 105]},
                    # JSON has no -inf; a piece of a character keeps its bytes.
                    {"token": "\ufffd", "logprob": -9999.0, "bytes": [0xE2]},
                ],
            }
        ],
        "refusal": None,
    }


def test_legacy_entries_keep_their_text_offsets_across_chunks() -> None:
    shape = CompletionLogprobs(2)
    assert shape.shape([HELLO, HELLO])["text_offset"] == [0, 2]
    later = shape.shape([HELLO])
    assert later == {
        "tokens": ["Hi"],
        "token_logprobs": [-0.5],
        "top_logprobs": [{"Hi": -0.5, "bytes:\\xe2": -9999.0}],
        "text_offset": [4],
    }
    assert CompletionLogprobs(0).shape([HELLO])["top_logprobs"] is None


def _piece(piece: bytes) -> TokenLogprob:
    return TokenLogprob(TokenChoice(7, -1.0, piece), ())


def test_legacy_text_offsets_count_a_character_split_across_tokens_once() -> None:
    """The text "Hi 😀!" as "Hi", " ", the emoji's first two bytes, its last two, "!": the
    emoji is one character of the text sent, so "!" starts at 4, and both halves start where
    it does."""
    emoji = "😀".encode()
    shape = CompletionLogprobs(0)
    first = shape.shape([_piece(b"Hi"), _piece(b" "), _piece(emoji[:2])])
    second = shape.shape([_piece(emoji[2:]), _piece(b"!")])
    assert first["text_offset"] + second["text_offset"] == [0, 2, 3, 3, 4]
    text = "Hi 😀!"
    assert text[4] == "!" and text[3] == "😀"


def test_legacy_pieces_of_characters_are_named_by_their_bytes() -> None:
    """The first two bytes of "日" (e6 97 a5) and of "本" (e6 9c ac): two pieces of different
    characters each keep their own entry and value, and the chosen piece is spelled as OpenAI
    spells it."""
    first, second = "日".encode()[:2], "本".encode()[:2]
    entry = TokenLogprob(
        TokenChoice(1, -0.2, first),
        (TokenChoice(1, -0.2, first), TokenChoice(2, -1.9, second), TokenChoice(3, -3.0, b"a")),
    )
    shaped = CompletionLogprobs(3).shape([entry])
    assert shaped["tokens"] == ["bytes:\\xe6\\x97"]
    assert shaped["top_logprobs"] == [
        {"bytes:\\xe6\\x97": -0.2, "bytes:\\xe6\\x9c": -1.9, "a": -3.0}
    ]
    assert shaped["top_logprobs"][0][shaped["tokens"][0]] == shaped["token_logprobs"][0]


def test_legacy_tokens_sharing_a_text_keep_the_higher_logprob() -> None:
    """Special tokens render as "": two of them name one key, which keeps the likelier."""
    entry = TokenLogprob(
        TokenChoice(9, -0.1, b"x"),
        (TokenChoice(9, -0.1, b"x"), TokenChoice(2, -0.7, b""), TokenChoice(3, -2.5, b"")),
    )
    shaped = CompletionLogprobs(3).shape([entry])
    assert shaped["top_logprobs"] == [{"x": -0.1, "": -0.7}]

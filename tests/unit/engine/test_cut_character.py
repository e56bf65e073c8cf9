"""A reply its token budget cuts in the middle of a character ends at its last whole one: the
partial bytes are no text the model wrote, and used to end the reply as U+FFFD."""

from __future__ import annotations

from app.engine.config import GenerationConfig
from app.engine.events import FinishEvent, TokenEvent
from app.engine.gamma import OFF
from app.engine.loop import SpeculativeEngine
from app.llama.token_text import whole_characters
from tests.helpers.fake_llama import FakeLlama, toy_logits

N_VOCAB = 16
EURO = "€".encode()  # three bytes


class _HalfCharacters(FakeLlama):
    """Every token spells the first two bytes of €: each next token's bytes make the one
    before invalid (U+FFFD), and the last token's are a character cut short."""

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:  # noqa: ARG002
        return EURO[:2]


def test_whole_characters_leaves_out_only_a_character_cut_at_the_end() -> None:
    assert whole_characters(b"ok" + EURO[:2]) == "ok"
    assert whole_characters(EURO) == "€"
    assert whole_characters(b"\xffok" + EURO[:1]) == "\ufffdok"
    assert whole_characters(b"") == ""


def test_a_reply_cut_mid_character_neither_streams_nor_stores_its_partial_bytes() -> None:
    engine = SpeculativeEngine(_HalfCharacters(toy_logits(3, N_VOCAB), N_VOCAB))
    events = list(engine.generate([1, 2, 3], GenerationConfig(max_tokens=5, gamma=OFF)))
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    result = finish.result
    assert len(result.token_ids) == 5
    # Four pairs made invalid by the bytes after them; the fifth pair is the cut character.
    assert result.text == "\ufffd" * 4
    streamed = "".join(e.text for e in events if isinstance(e, TokenEvent))
    assert streamed == result.text

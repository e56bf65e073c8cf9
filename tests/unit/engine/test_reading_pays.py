"""γ auto's judgement of whether a draft model should read the text it lacks for a reply:
the reading's measured cost against what drafting can save on the tokens left."""

from __future__ import annotations

import time

from app.engine.adaptive import GammaController
from app.engine.draft_reading import DraftReading
from app.engine.drafters import ModelDrafter
from app.metrics.rounds import RoundRecord
from tests.helpers.fake_llama import FakeLlama
from tests.helpers.hybrid_rounds import N_VOCAB, conversation, next_token

PLAIN_S = 0.025


def _measured(read_s_per_token: float = 0.003) -> GammaController:
    """A controller whose draft read a prompt at `read_s_per_token` and whose rounds made 9
    tokens in 4.5 plain steps: 2x plain, so each token drafted saves half a plain step."""
    controller = GammaController(initial_gamma=8, confidence_stop=False)
    controller.note_plain_step(PLAIN_S)
    controller.note_read(100, 100 * read_s_per_token)
    for i in range(8):
        gamma = controller.next_gamma()
        controller.observe(RoundRecord(i, "draft", gamma, 8, 8, 9, 2.5 * PLAIN_S, 2.0 * PLAIN_S, 8))
    return controller


def test_unmeasured_reading_is_assumed_to_pay() -> None:
    controller = GammaController(initial_gamma=4)
    controller.note_plain_step(PLAIN_S)
    assert controller.reading_pays(10_000, 1)


def test_a_long_prompt_pays_for_its_reading_only_with_enough_reply_left() -> None:
    # 400 tokens read in 1.2 s; each token drafted saves 12.5 ms. A text must save 1.5 times
    # its reading (the reply may end sooner, or paraphrase it): 144 tokens pay for it.
    controller = _measured()
    assert not controller.reading_pays(400, 63)
    assert not controller.reading_pays(400, 140)
    assert controller.reading_pays(400, 148)
    assert controller.reading_pays(40, 63)


def test_a_question_must_save_its_reading_and_a_text_half_as_much_again() -> None:
    # 96 tokens (a question) read in 0.288 s pay back over 24 tokens; 97 (a text) need 35.
    controller = _measured()
    assert controller.reading_pays(96, 24)
    assert not controller.reading_pays(96, 22)
    assert not controller.reading_pays(97, 24)
    assert controller.reading_pays(97, 36)


def test_slower_reading_needs_a_longer_reply() -> None:
    assert _measured(0.002).reading_pays(400, 120)
    assert not _measured(0.004).reading_pays(400, 120)


def test_a_few_tokens_read_do_not_set_the_rate() -> None:
    # Eight tokens in a second is a pass's fixed cost, not a rate per token.
    controller = _measured()
    for _ in range(20):
        controller.note_read(8, 1.0)
    assert controller.reading_pays(40, 63)


def test_a_draft_model_left_out_reply_after_reply_reads_one_now_and_then() -> None:
    """Rounds that delivered 2 tokens in 4.5 plain steps: reading never pays at that rate, and
    a reply left unread does not measure it again. So the 5th question reads anyway, then the
    14th, the 31st: after 4, 8 and 16 left unread in a row. A text (over 96 tokens to read) is
    never read so: its reading alone can cost more than a short reply takes."""
    controller = GammaController(initial_gamma=8, confidence_stop=False)
    controller.note_plain_step(PLAIN_S)
    controller.note_read(100, 0.3)
    for i in range(8):
        gamma = controller.next_gamma()
        controller.observe(RoundRecord(i, "draft", gamma, 8, 1, 2, 2.5 * PLAIN_S, 2.0 * PLAIN_S, 8))
    model = FakeLlama(next_token, N_VOCAB, n_ctx=4096)
    drafter = ModelDrafter(model, N_VOCAB)

    def read_at(prompt_tokens: int) -> list[int]:
        reading = DraftReading(time.perf_counter)
        return [
            i
            for i in range(40)
            if reading.leave_unread(drafter, controller, conversation(prompt_tokens, 7 * i), 128)
            is None
        ]

    assert not controller.reading_pays(96, 128)
    assert read_at(97) == [4, 13, 30]  # 96 tokens to read
    assert read_at(98) == []

"""A prompt read in parts, whole batches at a time, with a stop heard between them: the batches
are those one feed of the whole prompt decodes, and a stop ends the reply before its first token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.drafters import ModelDrafter
from app.engine.events import FinishEvent, TokenEvent
from app.engine.gamma import OFF, GammaSetting, fixed
from app.engine.loop import SpeculativeEngine
from app.engine.prompt_pass import part_size, read_prompt
from app.llama.batches import PROMPT_ROWS, batch_sizes
from app.llama.handle import common_prefix
from tests.helpers.fake_llama import FakeLlama, Logits, toy_logits

N_VOCAB = 32


class BatchedLlama(FakeLlama):
    """A FakeLlama that splits what it decodes into batches as LlamaModel.feed does, and logs
    them as (first position, size): llama.cpp may round a row by the size of its batch."""

    def __init__(self, n_batch: int, *, uniform: bool = False) -> None:
        super().__init__(toy_logits(3, N_VOCAB), N_VOCAB, n_ctx=4096)
        self.n_batch = n_batch
        self.uniform_batches = uniform
        self.batches: list[tuple[int, int]] = []
        self.after_feed: Callable[[], None] = lambda: None

    def feed(self, history: Sequence[int], n_logits: int) -> Logits:
        n_hist = len(history)
        n_rows = min(max(n_logits, 2), n_hist) if self.uniform_batches and n_logits else n_logits
        keep = min(common_prefix(self.tokens, history), n_hist - n_rows)
        if self.uniform_batches and 0 < n_hist - keep < 2:
            keep = max(0, n_hist - 2)
        last_at_least = max(n_rows, 2 if self.uniform_batches else 1)
        start = keep
        for size in batch_sizes(n_hist - keep, last_at_least, self.n_batch):
            self.batches.append((start, size))
            start += size
        rows = super().feed(history, n_logits)
        self.after_feed()
        return rows


def _prompt(n: int) -> list[int]:
    return [(7 * i + 1) % N_VOCAB for i in range(n)]


@pytest.mark.parametrize("uniform", [False, True])
@pytest.mark.parametrize("n_batch", [2, 5, 64])
def test_a_prompt_read_in_parts_decodes_the_batches_one_feed_would(
    n_batch: int, uniform: bool
) -> None:
    step = part_size(n_batch)
    for held in (0, 3, 40):
        for length in range(held + 1, held + 3 * step + 6):
            prompt = _prompt(length)
            alone, parts = (
                BatchedLlama(n_batch, uniform=uniform),
                BatchedLlama(n_batch, uniform=uniform),
            )
            for model in (alone, parts):
                model.feed(prompt[:held], 0)
                model.batches.clear()
            one = alone.feed(prompt, min(PROMPT_ROWS, length))[-1:]
            rows = read_prompt(parts, prompt, GenerationControl())
            assert rows is not None
            assert parts.batches == alone.batches, (held, length)
            np.testing.assert_array_equal(rows, one)
            assert parts.tokens == prompt
            assert parts.reused == alone.reused  # the pass's count, not its last part's


def test_a_stop_while_the_prompt_is_read_stops_after_the_part_being_read() -> None:
    model = BatchedLlama(16)
    control = GenerationControl()
    model.after_feed = control.stop  # the stop arrives while the first part is read
    prompt = _prompt(300)
    assert read_prompt(model, prompt, control) is None
    assert model.tokens == prompt[: part_size(16)]  # one whole part, kept for a later reply
    assert model.decoded == part_size(16)


def test_a_reply_stopped_while_its_prompt_is_read_ends_cancelled_before_its_first_token() -> None:
    target = BatchedLlama(16)
    control = GenerationControl()
    target.after_feed = control.stop
    events = list(
        SpeculativeEngine(target).generate(_prompt(300), GenerationConfig(gamma=OFF), control)
    )
    assert not [e for e in events if isinstance(e, TokenEvent)]
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    assert finish.result.finish_reason == "cancelled"
    assert finish.result.token_ids == []
    assert target.decoded == part_size(16)


@pytest.mark.parametrize("gamma", [OFF, fixed(3)])
def test_a_prompt_read_in_parts_gives_the_reply_one_feed_gives(gamma: GammaSetting) -> None:
    prompt = _prompt(333)
    config = GenerationConfig(max_tokens=20, gamma=gamma)

    def reply(target: FakeLlama) -> list[int]:
        draft = FakeLlama(toy_logits(3, N_VOCAB), N_VOCAB, n_ctx=4096)
        engine = SpeculativeEngine(target, ModelDrafter(draft, N_VOCAB))
        finish = list(engine.generate(prompt, config))[-1]
        assert isinstance(finish, FinishEvent)
        return finish.result.token_ids

    whole = FakeLlama(toy_logits(3, N_VOCAB), N_VOCAB, n_ctx=4096)  # says no batch: one feed
    assert reply(BatchedLlama(8)) == reply(whole)


def test_a_prompt_stopped_after_some_parts_reports_what_the_pass_found_held() -> None:
    """cache_n of a stopped read is what the cache held when the read began, not what its last
    part found (the parts before it, read by this same pass)."""
    model = BatchedLlama(16)
    prompt = _prompt(400)
    model.feed(prompt[:20], 0)
    control = GenerationControl()
    feeds = iter(range(2, -1, -1))
    model.after_feed = lambda: None if next(feeds) else control.stop()  # during the third part
    assert read_prompt(model, prompt, control) is None
    assert len(model.tokens) == 20 + 3 * part_size(16)
    assert model.reused == 20


def test_the_reading_says_how_far_it_has_come_and_clears_when_the_prompt_is_read() -> None:
    target = BatchedLlama(n_batch=64)
    control = GenerationControl()
    seen: list[tuple[int, int] | None] = []
    target.after_feed = lambda: seen.append(control.prompt_read)
    prompt = _prompt(300)
    assert read_prompt(target, prompt, control) is not None
    # A part's count is set once its feed is done: the first feed sees None, the last none.
    read = [s for s in seen if s is not None]
    assert read == sorted(read) and read[-1][0] < 300 and all(t == 300 for _, t in read)
    assert len(read) == len(seen) - 1 >= 3
    assert control.prompt_read is None

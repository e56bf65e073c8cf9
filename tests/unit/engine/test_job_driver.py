"""`drive` and `job_events` on a Runtime of fake models: what a job's Started reports of the
cache, how a raw prompt is tokenized, a logit bias checked against the vocabulary, and a
receiver that has the whole reply ending it as served, and the past-chats index learning only
the part of the reply that receiver kept."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.events import FinishEvent, TokenEvent
from app.engine.gamma import OFF, fixed
from app.engine.job_driver import (
    Failed,
    Job,
    OwnerEvent,
    ReplyComplete,
    Started,
    Ticket,
    drive,
    job_events,
)
from app.engine.runtime import Runtime
from app.errors import (
    WINDOW,
    ContextOverflowError,
    SettingValueError,
    SystemPromptOverflowError,
    user_message,
)
from app.llama.config import ModelConfig
from tests.helpers.fake_llama import Logits
from tests.helpers.fake_model import SPECIALS, VOCAB, FakeModel

TARGET = ModelConfig("target.gguf", n_ctx=256)
PROMPT = " the cat sat on the mat"
CONFIG = GenerationConfig(max_tokens=6, gamma=OFF)


class RestoringModel(FakeModel):
    """Finds its first prompt in a saved state, as LlamaModel's prompt cache restores one: the
    live cache held none of it, and `reused` reports all of it."""

    def feed(self, history: Sequence[int], n_logits: int) -> Logits:
        restored = not self.tokens and len(history) > 1
        rows = super().feed(history, n_logits)
        if restored:
            self.reused = len(history)
        return rows


def runtime_of(model: type[FakeModel] = FakeModel) -> Runtime:
    runtime = Runtime(
        open_model=lambda config, progress=None: model(config, progress=progress, step_s=0)
    )
    runtime.load_target(TARGET)
    return runtime


def run(runtime: Runtime, job: Job, ticket: Ticket | None = None) -> list[OwnerEvent]:
    events: list[OwnerEvent] = []
    drive(runtime, job, events.append, ticket or Ticket(1))
    return events


def started(events: list[OwnerEvent]) -> Started:
    first = events[0]
    assert isinstance(first, Started), first
    return first


def test_cached_tokens_count_what_the_prompts_pass_restored() -> None:
    runtime = runtime_of(RestoringModel)
    first = started(run(runtime, Job(CONFIG, prompt=PROMPT)))
    # Everything but the last token, which the engine always feeds afresh.
    assert first.cached_tokens == first.prompt_tokens - 1


def test_cached_tokens_are_none_when_exact_mode_empties_the_cache_first() -> None:
    runtime = runtime_of()
    run(runtime, Job(CONFIG, prompt=PROMPT))
    again = started(run(runtime, Job(CONFIG, prompt=PROMPT)))
    assert again.cached_tokens == again.prompt_tokens - 1  # the live cache held it
    # The first exact reply starts from an empty cache (ExactMode.begin_reply).
    exact = started(run(runtime, Job(GenerationConfig(max_tokens=6, exact=True), prompt=PROMPT)))
    assert exact.cached_tokens == 0


def test_a_raw_prompt_reads_special_token_text_only_when_the_job_asks() -> None:
    runtime = runtime_of()
    text = "<|im_start|> the cat"
    special = VOCAB.index("<|im_start|>")
    assert special < len(SPECIALS)
    ids, _events = job_events(
        runtime, Job(CONFIG, prompt=text, prompt_specials=True), Ticket(1).control
    )
    assert special in ids
    plain, _events = job_events(runtime, Job(CONFIG, prompt=text), Ticket(1).control)
    assert special not in plain


def _chat(system_words: int, turns: int) -> Job:
    system: ChatMessage = {"role": "system", "content": PROMPT * system_words}
    talk: list[ChatMessage] = [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": PROMPT},
    ]
    return Job(CONFIG, (system, *talk * turns, {"role": "user", "content": "hi"}))


def test_a_system_prompt_too_long_for_the_context_is_named_not_the_conversation() -> None:
    (failure,) = run(runtime_of(), _chat(system_words=60, turns=0))
    assert isinstance(failure, Failed) and failure.kind == "context"
    assert isinstance(failure.error, SystemPromptOverflowError)
    n_tokens = failure.error.n_tokens
    assert n_tokens >= TARGET.n_ctx
    # Neither a new chat nor a shorter question can help: the sentence says what can.
    assert failure.message == (
        f"the system prompt alone is {n_tokens} tokens but the context holds {TARGET.n_ctx}; "
        "shorten it or raise --n-ctx"
    )
    assert user_message(failure.error, WINDOW) == (
        f"The system prompt alone is {n_tokens} tokens but the context holds {TARGET.n_ctx}; "
        "shorten it or raise the context size in Settings."
    )


def test_a_stop_during_the_first_render_skips_the_system_prompts_own_render() -> None:
    """A session in a child process cannot stop a render midway: a Stop that came during the
    whole prompt's render must not pay for a second one (up to the template's time budget)."""
    runtime = runtime_of()
    ticket = Ticket(1)
    renders: list[int] = []
    real = runtime.chat_prompt

    def chat_prompt(messages: Any, control: Any = None, tools: Any = None) -> list[int]:
        renders.append(len(messages))
        ids = real(messages, None, tools=tools)  # as the child does: the Stop is not seen
        ticket.control.stop()  # pressed while this render ran
        return ids

    runtime.chat_prompt = chat_prompt  # type: ignore[method-assign]
    (failure,) = run(runtime, _chat(system_words=60, turns=0), ticket)
    assert isinstance(failure, Failed) and failure.message == "cancelled"
    assert failure.kind == "cancelled"  # a Stop, not a request the engine refused
    assert len(renders) == 1


def test_a_long_conversation_under_a_short_system_prompt_still_reads_as_the_conversation() -> None:
    (failure,) = run(runtime_of(), _chat(system_words=1, turns=20))
    assert isinstance(failure, Failed) and failure.kind == "context"
    assert type(failure.error) is ContextOverflowError


def test_a_logit_bias_outside_the_vocabulary_fails_the_job_naming_it() -> None:
    runtime = runtime_of()
    n_vocab = len(VOCAB)
    bias = GenerationConfig(max_tokens=2, sampling=SamplingConfig(logit_bias=((n_vocab, 1.0),)))
    (failure,) = run(runtime, Job(bias, prompt=PROMPT))
    assert isinstance(failure, Failed) and failure.kind == "invalid"
    assert isinstance(failure.error, SettingValueError)
    assert failure.error.setting == "logit_bias"
    inside = GenerationConfig(
        max_tokens=2, sampling=SamplingConfig(logit_bias=((n_vocab - 1, 1.0),))
    )
    assert isinstance(run(runtime, Job(inside, prompt=PROMPT))[0], Started)


@pytest.mark.parametrize("raised_at", [0, 2])
def test_a_receiver_with_the_whole_reply_ends_it_and_the_job_counts_as_served(
    raised_at: int,
) -> None:
    runtime = runtime_of()
    events: list[OwnerEvent] = []

    def sink(event: OwnerEvent) -> None:
        events.append(event)
        if isinstance(event, TokenEvent) and event.index == raised_at:
            raise ReplyComplete

    ticket = Ticket(1)
    job = Job(GenerationConfig(max_tokens=50, gamma=OFF), prompt=PROMPT)
    assert drive(runtime, job, sink, ticket) == "served"
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    # A plain reply's rounds emit one token each: none follows the one that completed it.
    assert len(finish.result.token_ids) == raised_at + 1
    assert ticket.completed and not ticket.cancelled


def test_the_past_chats_index_learns_only_the_tokens_the_receiver_kept(tmp_path: Path) -> None:
    """A stop string ends a reply inside a speculative round: the round's tokens past it were
    never shown, so the index must not draft them back in a later reply."""
    runtime = Runtime(
        open_model=lambda config, progress=None: FakeModel(config, progress=progress, step_s=0),
        history_dir=tmp_path,
    )
    runtime.load_target(TARGET)
    runtime.load_draft(ModelConfig("draft.gguf", n_ctx=256), vetted=True, joined=False)
    kept = 3  # inside the second round, which makes five

    events: list[OwnerEvent] = []

    def sink(event: OwnerEvent) -> None:
        events.append(event)
        if isinstance(event, TokenEvent) and event.index == kept - 1:
            raise ReplyComplete(kept)

    history = runtime.history
    assert history is not None
    job = Job(GenerationConfig(max_tokens=20, gamma=fixed(4)), prompt=PROMPT)
    assert drive(runtime, job, sink, Ticket(1)) == "served"
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    made = finish.result.token_ids
    assert len(made) > kept  # the round ran past the token that completed the reply
    prompt_ids = runtime.text_prompt(PROMPT)
    assert history.tokens == len(prompt_ids) + kept

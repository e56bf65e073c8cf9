"""A reply's first token is drawn from the prompt's own pass, before the draft model reads the
new message and before anything is drafted: neither delays it, and it costs no pass of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.engine.config import GenerationConfig
from app.engine.drafters import Draft, DraftRequest, ModelDrafter
from app.engine.events import Event, FinishEvent, TokenEvent
from app.engine.gamma import fixed
from app.engine.loop import SpeculativeEngine
from tests.helpers.exact_engine import ForwardingDrafter
from tests.helpers.fake_llama import FakeLlama, Logits

N_VOCAB = 64


def count_up(history: Sequence[int]) -> Logits:
    row = np.zeros(N_VOCAB, dtype=np.float32)
    row[(history[-1] + 1) % N_VOCAB] = 10.0
    return row


class LoggedDrafter(ForwardingDrafter):
    """The real ModelDrafter, logging each call into the same list as the reply's tokens."""

    def __init__(self, inner: ModelDrafter, log: list[str]) -> None:
        super().__init__(inner)
        self.log = log

    def propose(self, ask: DraftRequest) -> Draft:
        self.log.append("propose")
        return self.inner.propose(ask)

    def prefill(self, history: Sequence[int]) -> None:
        self.log.append("prefill")
        self.inner.prefill(history)


def _engine(log: list[str]) -> SpeculativeEngine:
    target = FakeLlama(count_up, N_VOCAB, name="target.gguf")
    draft = FakeLlama(count_up, N_VOCAB, name="draft.gguf")
    return SpeculativeEngine(target, LoggedDrafter(ModelDrafter(draft, N_VOCAB), log))


def _reply(engine: SpeculativeEngine, prompt: list[int], log: list[str]) -> FinishEvent:
    config = GenerationConfig(max_tokens=12, gamma=fixed(3))
    events: list[Event] = []
    for event in engine.generate(prompt, config):
        if isinstance(event, TokenEvent):
            log.append("token")
        events.append(event)
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    return finish


def test_a_new_message_gets_its_first_token_before_the_draft_model_reads_it() -> None:
    log: list[str] = []
    engine = _engine(log)
    _reply(engine, [1, 2, 3], log)  # measures the plain step the engine needs first
    log.clear()

    finish = _reply(engine, [1, 2, 3, 20, 21, 22, 23], log)

    assert log[:3] == ["token", "prefill", "propose"]
    assert finish.result.rounds[0].drafted == 3  # the first round drafts
    assert finish.result.token_ids == list(range(24, 36))


def test_the_first_token_costs_the_target_no_pass_of_its_own() -> None:
    target = FakeLlama(count_up, N_VOCAB, name="target.gguf")
    engine = SpeculativeEngine(target)
    config = GenerationConfig(max_tokens=4, gamma=fixed(3))

    events = list(engine.generate([1, 2, 3, 20], config))

    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    assert finish.result.token_ids == [21, 22, 23, 24]
    # One pass reads the prompt and draws the first token; each later token is a plain step.
    assert target.passes == 4
    assert len(finish.result.rounds) == 3


def test_the_draft_models_reading_counts_in_the_generation_time_it_delays() -> None:
    log: list[str] = []
    target = FakeLlama(count_up, N_VOCAB, name="target.gguf")
    draft = FakeLlama(count_up, N_VOCAB, name="draft.gguf")
    # A token read costs the draft a second and the target a millisecond on this clock.
    clock = lambda: draft.decoded + target.decoded * 1e-3  # noqa: E731
    drafter = LoggedDrafter(ModelDrafter(draft, N_VOCAB, clock=clock), log)
    engine = SpeculativeEngine(target, drafter, clock=clock)
    _reply(engine, [1, 2, 3], log)
    stats = _reply(engine, [1, 2, 3, 20, 21, 22, 23], log).result.stats

    # Read after the first token, the draft's reading holds up every token after it: it is
    # in the generation time (and so in tokens per second), not in the prompt's.
    assert stats.draft_prefill_s >= 4.0
    assert stats.prompt_s < 1.0
    assert stats.generation_s >= stats.draft_prefill_s


def test_a_prompt_the_models_hold_already_drafts_from_its_first_round() -> None:
    log: list[str] = []
    engine = _engine(log)
    prompt = [1, 2, 3, 20, 21, 22, 23]
    _reply(engine, [1, 2, 3], log)
    _reply(engine, prompt, log)
    log.clear()

    finish = _reply(engine, prompt, log)  # asked again, as a retry does

    assert log[:3] == ["token", "prefill", "propose"]
    assert finish.result.rounds[0].drafted == 3


def test_a_reply_with_room_for_no_draft_token_never_has_the_draft_model_read_it() -> None:
    # --max-tokens 2: the second token is the last, so no draft can go before it; reading the
    # prompt cost 0.35-0.55 s against 0.05 s for the reply on the demo pair.
    log: list[str] = []
    engine = _engine(log)
    config = GenerationConfig(max_tokens=2, gamma=fixed(3))
    finish = list(engine.generate([1, 2, 3, 20, 21], config))[-1]
    assert isinstance(finish, FinishEvent)
    assert finish.result.token_ids == [22, 23]
    assert "prefill" not in log and "propose" not in log
    assert finish.result.stats.draft_prefill_s == 0.0


def test_a_draft_model_stops_drafting_at_an_end_token() -> None:
    # A drafted end of the reply is the last token that can be kept: passes after it are lost.
    end = 30
    draft = FakeLlama(count_up, N_VOCAB, name="draft.gguf", eog=(end,))
    drafter = ModelDrafter(draft, N_VOCAB)
    ask = DraftRequest(
        [1, 2, 26],
        8,
        GenerationConfig().sampling,
        np.random.default_rng(0),
        0.0,
        stop=lambda _margin: True,  # γ auto's confidence stop, here never stopping
    )
    proposal = drafter.propose(ask)
    assert proposal.tokens == [27, 28, 29, end]
    assert proposal.steps == 4
    # γ auto learns its stop from a margin per drafted token, the end token's too.
    assert len(proposal.margins) == 4

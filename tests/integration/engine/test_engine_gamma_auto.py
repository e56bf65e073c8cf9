"""γ auto inside the real engine on the demo models: a γ set by hand mid-reply, the draft's
catch-up after rounds that ran without it, and greedy identity throughout (exact mode, so the
identity cannot depend on which rounds happened to be batched)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from app.engine import gamma
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.drafters import Draft, DraftRequest, ModelDrafter
from app.engine.events import FinishEvent, RoundEvent
from app.engine.result import GenerationResult
from app.engine.runtime import Runtime
from app.llama import weights
from app.llama.config import ModelConfig
from tests.helpers.engine import engine_of, loaded_runtime, run_to_end

QUESTION = [{"role": "user", "content": "Explain what a binary search tree is."}]
AUTO = GenerationConfig(max_tokens=64, gamma=gamma.AUTO, exact=True)


def _draft_alone(demo_models: Any) -> AbstractContextManager[Runtime]:
    """The demo pair with the draft model drafting alone: these tests are about its rounds."""
    return loaded_runtime(
        ModelConfig(str(demo_models.f32), n_ctx=1024),
        ModelConfig(str(demo_models.q4_1), n_ctx=1024),
        suffix=False,
    )


@pytest.fixture(scope="module")
def runtime(demo_models: Any) -> Iterator[Runtime]:
    with _draft_alone(demo_models) as rt:
        yield rt


def _run(rt: Runtime, control: GenerationControl, on_round: Any) -> GenerationResult:
    prompt = rt.chat_prompt(QUESTION)
    for event in engine_of(rt).generate(prompt, AUTO, control):
        if isinstance(event, RoundEvent):
            on_round(event.record.index, control)
        elif isinstance(event, FinishEvent):
            return event.result
    raise AssertionError("no FinishEvent")


def _plain(rt: Runtime) -> list[int]:
    result, _ = run_to_end(engine_of(rt), rt.chat_prompt(QUESTION), AUTO, speculative=False)
    return result.token_ids


def test_a_gamma_set_mid_reply_runs_from_the_next_round(runtime: Runtime) -> None:
    def set_two(index: int, control: GenerationControl) -> None:
        if index == 3:
            control.gamma = 2

    result = _run(runtime, GenerationControl(), set_two)
    later = result.rounds[4:]
    assert later
    remaining = AUTO.max_tokens - 1  # the prompt's pass drew the first token, in no round
    for r in result.rounds:
        if r.index >= 4:
            # γ is cut only where the token budget leaves no room for it.
            assert r.gamma == min(2, remaining - 1), r
        remaining -= r.emitted
    assert result.token_ids == _plain(runtime)


def test_a_manual_gamma_holds_until_auto_is_chosen_again(runtime: Runtime) -> None:
    def manual_then_auto(index: int, control: GenerationControl) -> None:
        if index == 6:
            control.gamma = None

    control = GenerationControl(gamma=1)
    result = _run(runtime, control, manual_then_auto)
    early = [r for r in result.rounds[:7] if r.drafted]
    assert early and all(r.gamma == 1 for r in early)
    assert result.token_ids == _plain(runtime)


def test_the_draft_catches_up_in_one_batch_timed_apart(runtime: Runtime) -> None:
    """Speculation toggled off for rounds 2..9: the first round drafting after rounds without
    the draft reads the missed tokens first, timed as draft_catchup_s; no other round does."""

    def pause(index: int, control: GenerationControl) -> None:
        if index == 1:
            control.speculative = False
        if index == 9:
            control.speculative = True

    drafter = runtime.drafter
    assert isinstance(drafter, ModelDrafter)
    result = _run(runtime, GenerationControl(), pause)
    behind = False
    caught_up = 0.0
    for r in result.rounds:
        if r.draft_steps:
            # Catch-up happens exactly on the first drafting round after rounds without it.
            assert (r.draft_catchup_s > 0.0) == behind, r
            caught_up += r.draft_catchup_s
            behind = False
        else:
            assert r.draft_catchup_s == 0.0
            behind = behind or r.emitted > 0
    assert caught_up > 0.0
    assert result.stats.draft_catchup_s == pytest.approx(caught_up)
    assert "draft_catchup_s" in result.to_json()["stats"]
    assert result.token_ids == _plain(runtime)
    # In step: the draft's cache holds the reply's prefix, not the prompt alone.
    assert len(drafter.model.tokens) > len(runtime.chat_prompt(QUESTION)) + 10


@pytest.fixture(scope="module")
def dear_draft_runtime(demo_models: Any) -> Iterator[Runtime]:
    """The same pair with the draft in plain CPU buffers, a pass about half a plain step: on a
    CPU with AMX a draft's one-token passes on AMX buffers cost so little that its drafts
    rarely stop before the ceiling."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(weights, "one_token_buffers", lambda *_args: False)
        with _draft_alone(demo_models) as rt:
            yield rt


def test_the_confidence_stop_ends_drafts_at_the_drafts_doubts(
    dear_draft_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under γ auto the demo draft proposes up to the ceiling and stops after a token it is
    unsure of; the reply is still the plain greedy one."""
    runtime = dear_draft_runtime
    for _ in range(3):  # γ auto learns which margins survive, as in the replies before
        _run(runtime, GenerationControl(), lambda *_: None)
    drafts: list[tuple[int, Draft]] = []
    real = ModelDrafter.propose

    def spy(self: ModelDrafter, ask: DraftRequest) -> Draft:
        draft = real(self, ask)
        if ask.stop is not None:
            drafts.append((ask.max_tokens, draft))
        return draft

    monkeypatch.setattr(ModelDrafter, "propose", spy)
    results = [_run(runtime, GenerationControl(), lambda *_: None) for _ in range(2)]
    assert drafts
    assert all(len(d.margins) == len(d.tokens) for _, d in drafts)
    # Some drafts ran to the ceiling; others ended early, on their least sure token.
    assert any(len(d.tokens) == ceiling for ceiling, d in drafts)
    ended = [d for ceiling, d in drafts if 0 < len(d.tokens) < ceiling]
    assert ended
    every_margin = [m for _, d in drafts for m in d.margins]
    last_margins = [d.margins[-1] for d in ended]
    assert sum(last_margins) / len(last_margins) < sum(every_margin) / len(every_margin)
    plain = _plain(runtime)
    assert all(r.token_ids == plain for r in results)

"""A draft model γ auto has paused reads nothing of a new prompt, and its probes read a window
of the conversation at most, on the demo target with the useless (pruned) draft: reading a
long prompt one token a pass cost more than a short reply takes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.engine import gamma
from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.draft_reading import PROBE_READ_LIMIT
from app.engine.drafters import PROBE_WINDOW, ModelDrafter
from app.engine.loop import SpeculativeEngine
from app.engine.runtime import Runtime
from app.llama.config import ModelConfig
from app.metrics.rounds import RoundRecord
from models.prune import useless_draft
from tests.helpers.engine import engine_of, loaded_runtime, run_to_end

PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs each evening, trimmed the wick, wound the "
    "clockwork that turned the lens, and wrote the weather into a leather book. "
)
LONG: list[ChatMessage] = [
    {"role": "user", "content": PASSAGE * 4 + "\nGo on with the story: what did the keeper see?"}
]


def _pause(engine: SpeculativeEngine) -> None:
    """Have γ auto pause the draft, on rounds that lose. When a real reply pauses it depends on
    the timing of the process's passes (tests/unit/engine/test_adaptive.py covers the rule): in
    the full suite a first plain step of 45 ms, against 31 ms for the useless draft's γ 1
    rounds, once left it running, and another time four replies did not pause it."""
    controller = engine.gamma_controller(GenerationConfig(gamma=gamma.AUTO))
    assert controller is not None
    plain = RoundRecord(0, "plain", 0, 0, 0, 1, 0.0, 0.025, 0)
    controller.observe(plain)
    for _ in range(40):
        g = controller.next_gamma()
        controller.observe(RoundRecord(0, "draft", g, g, 0, 1, 0.01 * g, 0.04, g) if g else plain)
        if controller.speculation_off:
            return
    raise AssertionError("γ auto did not pause a draft whose every token was refused")


@contextmanager
def _paused_useless_draft(demo_models: Any) -> Iterator[tuple[Runtime, ModelDrafter]]:
    """The demo target with the useless (pruned) draft alone, which γ auto has paused."""
    pruned = useless_draft(demo_models.q4_1, Path(demo_models.f32).parent)
    with loaded_runtime(
        ModelConfig(str(demo_models.f32), n_ctx=1024),
        ModelConfig(str(pruned), n_ctx=1024),
        suffix=False,
    ) as rt:
        drafter = rt.drafter
        assert isinstance(drafter, ModelDrafter)
        _pause(engine_of(rt))
        yield rt, drafter


def test_a_paused_draft_reads_only_what_its_probes_draft_after(demo_models: Any) -> None:
    with _paused_useless_draft(demo_models) as (rt, drafter):
        engine = engine_of(rt)
        prompt = rt.chat_prompt(LONG)
        assert len(prompt) > PROBE_READ_LIMIT + PROBE_WINDOW
        config = GenerationConfig(max_tokens=200, gamma=gamma.AUTO, exact=True)
        result, _ = run_to_end(engine, prompt, config)
        plain, _ = run_to_end(engine, prompt, config, speculative=False)

    assert result.token_ids == plain.token_ids
    assert result.stats.draft_prefill_s == 0.0
    probes = [r for r in result.rounds if r.drafted]
    assert probes, f"no probe ran in {len(result.token_ids)} tokens"
    # Each probe read its window first, timed apart from drafting.
    assert all(r.draft_catchup_s > 0.0 for r in probes)
    # The first probe drafts as far as a draft with no record since the pause might pay; two
    # refused at once bring the useless draft's probes down to a token or two.
    assert all(r.gamma <= 2 for r in probes[2:])
    # The draft's cache holds the last probe's window and draft, not the prompt.
    assert len(drafter.model.tokens) <= PROBE_WINDOW + max(r.drafted for r in probes)


QUESTION: list[ChatMessage] = [
    {
        "role": "user",
        "content": "I keep a small vegetable garden on a balcony that faces north. Which "
        "vegetables grow well with little direct sun, and how often should I water them?",
    }
]


def test_a_paused_draft_behind_by_a_question_reads_it_whole_for_a_probe(
    demo_models: Any,
) -> None:
    """A probe after part of a question judges the part: one behind by a question (at most
    PROBE_READ_LIMIT tokens) reads it whole before drafting, not its last PROBE_WINDOW."""
    with _paused_useless_draft(demo_models) as (rt, drafter):
        engine = engine_of(rt)
        _until_probe_due(engine)
        prompt = rt.chat_prompt(QUESTION)
        assert PROBE_WINDOW + 8 < len(prompt) <= PROBE_READ_LIMIT - 8
        config = GenerationConfig(max_tokens=8, gamma=gamma.AUTO, exact=True)
        result, _ = run_to_end(engine, prompt, config)
        read = list(drafter.model.tokens)
        plain, _ = run_to_end(engine, prompt, config, speculative=False)

    assert result.token_ids == plain.token_ids
    probes = [r for r in result.rounds if r.drafted]
    assert probes, f"no probe ran in {len(result.token_ids)} tokens"
    assert probes[0].draft_catchup_s > 0.0
    assert read[: len(prompt)] == prompt


def _until_probe_due(engine: SpeculativeEngine) -> None:
    """Plain steps until the paused draft's next probe is due, so that the next reply's first
    round is one (a draft that never paid keeps its schedule across replies)."""
    controller = engine.gamma_controller(GenerationConfig(gamma=gamma.AUTO))
    assert controller is not None and controller.speculation_off
    plain = RoundRecord(0, "plain", 0, 0, 0, 1, 0.0, 0.025, 0)
    while controller.next_gamma() == 0:
        controller.observe(plain)

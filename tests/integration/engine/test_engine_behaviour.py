"""Engine behaviour beyond exactness: stopping, the context limit, live toggling, cache reuse,
chat templates and memory accounting, on the real demo models."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.control import GenerationControl
from app.engine.drafters import ModelDrafter
from app.engine.events import FinishEvent, TokenEvent
from app.engine.gamma import AUTO, fixed
from app.engine.loop import SpeculativeEngine
from app.engine.runtime import Runtime
from app.errors import ContextOverflowError, InvalidSettingError
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from app.metrics.cost_model import MAX_GAMMA
from tests.helpers.engine import engine_of, loaded_runtime, run_to_end

QUESTION = [{"role": "user", "content": "Explain what a binary search tree is."}]


@pytest.fixture(scope="module")
def runtime(pair_runtime: Runtime) -> Runtime:
    return pair_runtime


def test_chat_prompt_uses_the_models_own_template(runtime: Runtime) -> None:
    ids = runtime.chat_prompt([{"role": "user", "content": "Hello"}])
    assert runtime.target is not None
    text = runtime.target.detokenize(ids, special=True)
    # SmolLM2's template is ChatML with a default system message; the markers must be single
    # special tokens, not spelled-out text.
    assert "<|im_start|>user\nHello<|im_end|>" in text
    assert text.rstrip().endswith("<|im_start|>assistant")
    im_start = runtime.target.tokenize("<|im_start|>", add_special=False, parse_special=True)
    assert len(im_start) == 1
    assert ids.count(im_start[0]) == 3


def test_stop_between_rounds_keeps_partial_reply(runtime: Runtime) -> None:
    control = GenerationControl()
    prompt = runtime.chat_prompt(QUESTION)
    seen: list[TokenEvent] = []
    result = None
    for event in engine_of(runtime).generate(prompt, GenerationConfig(max_tokens=200), control):
        if isinstance(event, TokenEvent):
            seen.append(event)
            if len(seen) >= 10:
                control.stop()
        elif isinstance(event, FinishEvent):
            result = event.result
    assert result is not None
    assert result.finish_reason == "cancelled"
    # Stop takes effect at the next round boundary: at most one round (gamma + 1) more.
    assert 10 <= len(result.token_ids) <= 10 + 5 + 1
    assert result.text == "".join(e.text for e in seen)


def test_toggling_speculation_mid_reply_keeps_output_and_switches_mode(runtime: Runtime) -> None:
    prompt = runtime.chat_prompt(QUESTION)
    config = GenerationConfig(max_tokens=96, gamma=fixed(4))
    plain, _ = run_to_end(engine_of(runtime), prompt, config, speculative=False)
    control = GenerationControl()
    result = None
    for event in engine_of(runtime).generate(prompt, config, control):
        if isinstance(event, TokenEvent) and event.index == 40:
            control.speculative = False
        elif isinstance(event, FinishEvent):
            result = event.result
    assert result is not None
    assert result.token_ids == plain.token_ids
    modes = [r.mode for r in result.rounds]
    assert "hybrid" in modes  # the draft model drafts with the suffix index
    # After the toggle, every round is a plain step.
    switched = next(
        i
        for i, r in enumerate(result.rounds)
        if sum(x.emitted for x in result.rounds[: i + 1]) > 41
    )
    assert all(r.mode == "plain" and r.drafted == 0 for r in result.rounds[switched + 1 :])


def test_context_limit_ends_reply_without_crash(demo_models: Any) -> None:
    with loaded_runtime(
        ModelConfig(str(demo_models.f32), n_ctx=64),
        ModelConfig(str(demo_models.q4_1), n_ctx=64),
    ) as rt:
        prompt = rt.text_prompt("The alphabet, letter by letter: A, B, C, D, E, F,")
        config = GenerationConfig(max_tokens=500, gamma=fixed(6))
        spec, _ = run_to_end(engine_of(rt), prompt, config)
        plain, _ = run_to_end(engine_of(rt), prompt, config, speculative=False)
        assert rt.target is not None
        # llama.cpp rounds tiny contexts up (to 256 cells); the engine must use the real size.
        n_ctx = rt.target.n_ctx
        assert spec.finish_reason == plain.finish_reason == "context"
        # The last token is emitted but never needs a cache cell, hence + 1.
        assert len(prompt) + len(spec.token_ids) == n_ctx + 1
        assert spec.token_ids == plain.token_ids
        too_long = rt.text_prompt("word " * (n_ctx + 10))
        with pytest.raises(ContextOverflowError, match=f"context holds {n_ctx}"):
            run_to_end(engine_of(rt), too_long, config)


def test_cache_reuse_across_turns_matches_a_fresh_cache(demo_models: Any, runtime: Runtime) -> None:
    """The second turn reuses the first turn's KV prefix; a fresh model must agree exactly."""
    first = runtime.chat_prompt(QUESTION)
    reply, _ = run_to_end(engine_of(runtime), first, GenerationConfig(max_tokens=24))
    assert runtime.target is not None
    follow_up = runtime.chat_prompt(
        [
            *QUESTION,
            {"role": "assistant", "content": reply.text},
            {"role": "user", "content": "Now give an example in Python."},
        ]
    )
    warm, _ = run_to_end(engine_of(runtime), follow_up, GenerationConfig(max_tokens=48))

    fresh_target = LlamaModel(ModelConfig(str(demo_models.f32), n_ctx=1024))
    fresh_draft = LlamaModel(ModelConfig(str(demo_models.q4_1), n_ctx=1024))
    try:
        fresh = SpeculativeEngine(fresh_target, ModelDrafter(fresh_draft, fresh_target.n_vocab))
        cold, _ = run_to_end(fresh, follow_up, GenerationConfig(max_tokens=48))
    finally:
        fresh_target.close()
        fresh_draft.close()
    assert warm.token_ids == cold.token_ids


def test_same_seed_gives_same_sampled_reply(demo_models: Any, runtime: Runtime) -> None:
    """A seed repeats a sampled reply drafted by a model when the rounds repeat: same γ, same
    caches. (Under γ auto they need not: its rounds depend on what earlier replies taught it,
    and on a cache that already holds the prompt the draft drafts from the first round.)"""
    prompt = runtime.chat_prompt(QUESTION)
    config = GenerationConfig(
        max_tokens=32, gamma=fixed(3), sampling=SamplingConfig(temperature=0.8, top_p=0.95, seed=7)
    )
    target = LlamaModel(ModelConfig(str(demo_models.f32), n_ctx=1024))
    draft = LlamaModel(ModelConfig(str(demo_models.q4_1), n_ctx=1024))
    try:
        engine = SpeculativeEngine(target, ModelDrafter(draft, target.n_vocab))
        # The engine times a plain step before it first drafts: a reply that does so runs its
        # rounds apart from the ones after it.
        run_to_end(engine, prompt, config)
        replies = []
        for _ in range(2):
            target.reset()
            draft.reset()
            replies.append(run_to_end(engine, prompt, config)[0])
    finally:
        target.close()
        draft.close()
    assert replies[0].token_ids == replies[1].token_ids
    assert replies[0].stats.drafted > 0


def test_memory_report_counts_the_draft_separately(runtime: Runtime) -> None:
    usage = runtime.memory()
    assert usage.target_weights > 500_000_000  # F32 SmolLM2-135M
    assert 50_000_000 < usage.draft_weights < 120_000_000  # Q4_1
    # 30 layers x 1024 cells x 3 KV heads x 64 dims x (K + V) x 2 bytes.
    assert usage.target_kv == 30 * 1024 * 3 * 64 * 2 * 2
    assert usage.total == (
        usage.target_weights + usage.target_kv + usage.draft_weights + usage.draft_kv
    )


def test_impossible_generation_settings_are_refused(runtime: Runtime) -> None:
    with pytest.raises(InvalidSettingError, match="max tokens"):
        next(iter(engine_of(runtime).generate([1, 2, 3], GenerationConfig(max_tokens=0))))


@pytest.mark.parametrize("length", [0, -1, MAX_GAMMA + 1])
def test_a_fixed_gamma_outside_its_range_cannot_be_made(length: int) -> None:
    with pytest.raises(InvalidSettingError, match=f"gamma must be .* 1..{MAX_GAMMA}, got {length}"):
        fixed(length)


def test_rows_asked_for_across_a_batch_boundary_all_come_back(runtime: Runtime) -> None:
    target = runtime.target
    assert target is not None
    # 515 tokens with the last 6 rows wanted: batches of 512 + 3 would leave 3 of them in the
    # first batch, whose logits llama.cpp does not keep.
    history = [target.bos_id, *range(1000, 1000 + target.n_batch + 2)]
    target.reset()
    straddling = target.feed(history, 6)
    target.reset()
    target.feed(history[:-6], 0)
    in_one_pass = target.feed(history, 6)
    target.reset()
    assert straddling.shape == (6, target.n_vocab)
    assert np.array_equal(straddling, in_one_pass)


def test_stats_report_the_gamma_that_ran_not_the_one_asked_for(runtime: Runtime) -> None:
    prompt = runtime.chat_prompt(QUESTION)
    control = GenerationControl()
    result = None
    for event in engine_of(runtime).generate(
        prompt, GenerationConfig(max_tokens=48, gamma=fixed(4)), control
    ):
        if isinstance(event, TokenEvent) and event.index == 20:
            control.gamma = 2  # a manual change in the middle of the reply
        elif isinstance(event, FinishEvent):
            result = event.result
    assert result is not None
    spec = [r.gamma for r in result.rounds if r.drafted > 0]
    histogram = result.stats.gamma_histogram
    assert 2 in histogram and 4 in histogram
    assert set(histogram) <= {0, 1, 2, 3, 4}  # 1, 3: the last round, cut by the token budget
    assert sum(histogram.values()) == result.stats.rounds
    assert histogram.get(0, 0) == sum(1 for r in result.rounds if r.drafted == 0)
    assert result.stats.gamma == pytest.approx(sum(spec) / len(spec))
    assert 2 < result.stats.gamma < 4
    assert result.to_json()["stats"]["gamma_histogram"] == histogram


def test_a_reply_whose_every_round_ran_plain_reports_mode_plain(runtime: Runtime) -> None:
    prompt = runtime.chat_prompt(QUESTION)
    # Two tokens: the prompt's pass draws the first, and the only round has no room to draft.
    result, _ = run_to_end(
        engine_of(runtime), prompt, GenerationConfig(max_tokens=2, gamma=fixed(4))
    )
    assert [r.drafted for r in result.rounds] == [0]
    assert result.mode == "plain"
    assert result.stats.gamma == 0
    assert result.stats.gamma_histogram == {0: 1}


def test_the_result_carries_the_plain_step_the_engine_measured(runtime: Runtime) -> None:
    prompt = runtime.chat_prompt(QUESTION)
    result, _ = run_to_end(
        engine_of(runtime), prompt, GenerationConfig(max_tokens=12, gamma=fixed(3))
    )
    assert result.plain_step_s is not None and result.plain_step_s > 0
    assert result.plain_step_s == engine_of(runtime).plain_step_s
    spec = [r.verify_s for r in result.rounds if r.drafted > 0]
    assert result.stats.c_verify == pytest.approx(sum(spec) / len(spec) / result.plain_step_s)


def test_gamma_auto_runs_to_the_ceiling_the_settings_accept(runtime: Runtime) -> None:
    prompt = runtime.chat_prompt(QUESTION)
    config = GenerationConfig(max_tokens=8, gamma=AUTO)
    result, _ = run_to_end(engine_of(runtime), prompt, config)
    assert result.finish_reason in {"stop", "length"}
    assert max(r.gamma for r in result.rounds) <= MAX_GAMMA


def test_rounds_report_the_time_spent_outside_the_model_passes(runtime: Runtime) -> None:
    prompt = runtime.chat_prompt(QUESTION)
    result, _ = run_to_end(engine_of(runtime), prompt, GenerationConfig(max_tokens=16))
    assert all(r.overhead_s >= 0.0 for r in result.rounds)
    assert any(r.overhead_s > 0.0 for r in result.rounds)
    assert result.stats.overhead_s == pytest.approx(sum(r.overhead_s for r in result.rounds))
    # The wall time of the reply holds every round's passes and overhead.
    passes = sum(r.draft_s + r.verify_s + r.draft_catchup_s for r in result.rounds)
    assert passes + result.stats.overhead_s <= result.stats.generation_s + 1e-6


def test_a_prompt_asked_for_again_gives_the_first_token_the_same_row(demo_models: Any) -> None:
    """The second time, the cache holds the whole prompt; its last token is still computed in a
    batch, not in a one-row pass, which rounds differently: the same prompt, the same row."""
    target = LlamaModel(ModelConfig(str(demo_models.f32), n_ctx=512))
    try:
        engine = SpeculativeEngine(target)
        prompt = target.tokenize("The capital of France is")
        config = GenerationConfig(max_tokens=1, logprobs=5)
        cold, events = run_to_end(engine, prompt, config)
        assert target.tokens == prompt  # the prompt, last token included, is cached
        warm, again = run_to_end(engine, prompt, config)
    finally:
        target.close()
    first = [e.logprob for e in events if isinstance(e, TokenEvent)]
    second = [e.logprob for e in again if isinstance(e, TokenEvent)]
    assert first and first == second
    assert cold.token_ids == warm.token_ids

"""llama.cpp grammars in the speculative engine, on the real demo models: greedy replies under a
JSON schema are the plain replies under it whatever drafts, and sampled ones still match it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.constraint import Grammar
from app.engine.drafters import ModelDrafter, PromptLookupDrafter
from app.engine.gamma import fixed
from app.engine.loop import SpeculativeEngine
from app.engine.runtime import Runtime
from app.errors import InvalidSettingError
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from app.server.structured import schema_grammar
from tests.helpers.engine import run_to_end
from tests.helpers.json_schemas import SCHEMAS

MAX_TOKENS = 160


@pytest.fixture(scope="module")
def prompts(f32_runtime: Runtime) -> dict[str, list[int]]:
    return {
        name: f32_runtime.chat_prompt([{"role": "user", "content": prompt}])
        for name, (prompt, _) in SCHEMAS.items()
    }


@pytest.fixture(scope="module")
def draft_model(demo_models: Any) -> Iterator[LlamaModel]:
    model = LlamaModel(ModelConfig(str(demo_models.q4_1), n_ctx=2048))
    yield model
    model.close()


def _config(name: str, *, draft: bool = True, **sampling: Any) -> GenerationConfig:
    return GenerationConfig(
        max_tokens=MAX_TOKENS,
        gamma=fixed(4),
        sampling=SamplingConfig(**sampling),
        constraint=Grammar(schema_grammar(SCHEMAS[name][1]), draft=draft),
    )


def _valid(name: str, text: str) -> None:
    jsonschema.validate(json.loads(text), SCHEMAS[name][1])


def test_greedy_replies_under_a_schema_are_the_plain_ones_for_every_draft(
    f32_runtime: Runtime, draft_model: LlamaModel, prompts: dict[str, list[int]]
) -> None:
    assert f32_runtime.target is not None
    target = f32_runtime.target
    model = SpeculativeEngine(target, ModelDrafter(draft_model, target.n_vocab))
    lookup = SpeculativeEngine(target, PromptLookupDrafter())
    drafted = {"masked": 0, "unmasked": 0}
    accepted = {"masked": 0, "unmasked": 0}
    for name, ids in prompts.items():
        config = _config(name)
        plain, _ = run_to_end(model, ids, config, speculative=False)
        assert plain.finish_reason == "stop", plain.text
        _valid(name, plain.text)
        for engine in (model, lookup):
            result, _ = run_to_end(engine, ids, config)
            assert result.token_ids == plain.token_ids, name
        for run, cfg in (("masked", config), ("unmasked", _config(name, draft=False))):
            result, _ = run_to_end(model, ids, cfg)
            assert result.token_ids == plain.token_ids, name
            drafted[run] += result.stats.drafted
            accepted[run] += result.stats.accepted
    assert accepted["masked"] / drafted["masked"] > accepted["unmasked"] / drafted["unmasked"]


@pytest.mark.parametrize("name", ["planets", "settings", "status"])
def test_sampled_speculative_replies_match_the_schema(
    f32_runtime: Runtime, draft_model: LlamaModel, prompts: dict[str, list[int]], name: str
) -> None:
    assert f32_runtime.target is not None
    engine = SpeculativeEngine(
        f32_runtime.target, ModelDrafter(draft_model, f32_runtime.target.n_vocab)
    )
    config = _config(name, temperature=0.9, top_p=0.95)
    ended = 0
    for seed in range(6):
        result, _ = run_to_end(engine, prompts[name], replace_seed(config, seed))
        assert result.stats.drafted > 0
        if result.finish_reason == "stop":  # a cut-off reply is a prefix of a valid one
            ended += 1
            _valid(name, result.text)
    assert ended >= 4


def replace_seed(config: GenerationConfig, seed: int) -> GenerationConfig:
    return replace(config, sampling=replace(config.sampling, seed=seed))


def test_a_grammar_llama_cpp_cannot_parse_is_a_setting_error(
    f32_runtime: Runtime, prompts: dict[str, list[int]]
) -> None:
    assert f32_runtime.engine is not None
    config = GenerationConfig(max_tokens=4, constraint=Grammar("root ::= ("))
    with pytest.raises(InvalidSettingError, match="grammar"):
        run_to_end(f32_runtime.engine, prompts["person"], config)

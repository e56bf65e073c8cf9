"""Record where a real draft agrees with its target, for replaying γ auto offline.

Under greedy decoding a reply is fixed by its prompt, and whether a round keeps a draft token
depends only on whether the draft's greedy guess at that position, given the true text so far,
is the target's token. So one string per prompt (1 where the draft would guess right) replays
any γ schedule on that text exactly (tests/helpers/gamma_replay.py). The draft is read the way
the engine reads it, one token per pass after a batched prompt: near-ties make the guesses
depend on how the cache was filled.

It also records the draft's confidence margin at each position, so the replay can run γ
auto's confidence stop. The round costs are measured through the engine itself, in plain
steps: a straight line for the draft's seconds by passes, and the verify seconds by rows
checked.

    python -m tests.helpers.agreement OUT.json [--max-tokens 256] [--prompts FILE]

runs the demo pair (built into the test model cache) on the built-in bench prompts, or on
any prompt set `specchat bench --prompts` takes.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.prompts import BenchPrompt, load_prompts
from app.bench.turns import prompt_ids_for
from app.engine.config import GenerationConfig, SamplingConfig
from app.engine.gamma import fixed
from app.engine.result import GenerationResult
from app.engine.runtime import Runtime
from app.engine.sampling import logit_margin
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from app.metrics.cost_model import MAX_GAMMA, fit_verify_line
from tests.helpers.engine import engine_of, loaded_runtime, run_to_end

GREEDY = SamplingConfig(temperature=0.0)
# Rounds at every γ on these many prompts, of this many tokens, price the rounds.
_COST_PROMPTS = 3
_COST_TOKENS = 96


def _generate(
    runtime: Runtime, prompt: Sequence[int], config: GenerationConfig, *, speculative: bool
) -> GenerationResult:
    runtime.reset_caches()  # every run from cold caches, as the bench runs them
    result, _ = run_to_end(engine_of(runtime), prompt, config, speculative=speculative)
    return result


def agreement(
    draft: LlamaModel, prompt: Sequence[int], reply: Sequence[int], n_vocab: int
) -> tuple[str, list[float]]:
    """'1' at each reply position where the draft's greedy guess is the reply's token, and
    the draft's confidence margin there (what γ auto's confidence stop reads)."""
    draft.reset()
    draft.feed(prompt[:-1], 0)
    marks = []
    margins = []
    for t, token in enumerate(reply):
        row = draft.feed([*prompt, *reply[:t]], 1)[0][:n_vocab]
        marks.append("1" if int(np.argmax(row)) == token else "0")
        margins.append(round(logit_margin(row), 5))
    return "".join(marks), margins


def measure_costs(runtime: Runtime, prompts: Sequence[Sequence[int]]) -> dict[str, Any]:
    """Draft seconds per round as once + per pass, verify seconds by rows: plain steps."""
    draft_by_passes: dict[int, list[float]] = {}
    verify_by_rows: dict[int, list[float]] = {}
    for gamma in range(1, MAX_GAMMA + 1):
        config = GenerationConfig(max_tokens=_COST_TOKENS, gamma=fixed(gamma), sampling=GREEDY)
        for prompt in prompts[:_COST_PROMPTS]:
            for r in _generate(runtime, prompt, config, speculative=True).rounds:
                verify_by_rows.setdefault(r.drafted + 1, []).append(r.verify_s)
                if r.drafted:
                    draft_by_passes.setdefault(r.draft_steps, []).append(r.draft_s)
    plain = statistics.median(verify_by_rows[1])
    points = [(n, statistics.median(s) / plain, float(len(s))) for n, s in draft_by_passes.items()]
    line = fit_verify_line(sorted(points))
    assert line is not None
    verify = [
        statistics.median(verify_by_rows[rows]) / plain if rows in verify_by_rows else None
        for rows in range(1, MAX_GAMMA + 2)
    ]
    return {
        "plain_step_s": plain,
        "draft_once": line.intercept,
        "draft_per_pass": line.per_row,
        "verify_by_rows": verify,
    }


def record(
    target: ModelConfig, draft: ModelConfig, prompts: Sequence[BenchPrompt], max_tokens: int
) -> dict[str, Any]:
    with loaded_runtime(target, draft) as runtime:
        ids = prompt_ids_for(runtime, prompts)
        n_vocab = runtime.target_facts.n_vocab if runtime.target_facts else 0
        out: dict[str, Any] = {"max_tokens": max_tokens, "prompts": []}
        with LlamaModel(draft) as reader:
            for prompt, prompt_ids in zip(prompts, ids, strict=True):
                config = GenerationConfig(max_tokens=max_tokens, sampling=GREEDY)
                result = _generate(runtime, prompt_ids, config, speculative=False)
                agree, margins = agreement(reader, prompt_ids, result.token_ids, n_vocab)
                out["prompts"].append(
                    {
                        "class": prompt.prompt_class,
                        "name": prompt.name,
                        "finish": result.finish_reason,
                        "agree": agree,
                        "margins": margins,
                    }
                )
        out["costs"] = measure_costs(runtime, ids)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--prompts", default="builtin", help="as `specchat bench --prompts`")
    args = parser.parse_args()
    from models.demo import ensure_demo_models
    from tests.conftest import MODEL_CACHE

    demo = ensure_demo_models(folder=MODEL_CACHE)
    prompts = load_prompts(args.prompts)
    data = record(
        ModelConfig(str(demo.f32), n_ctx=4096),
        ModelConfig(str(demo.q4_1), n_ctx=4096),
        prompts,
        args.max_tokens,
    )
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

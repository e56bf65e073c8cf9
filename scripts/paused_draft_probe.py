"""How a good draft model fares once γ auto has paused it: whether its probes win it back.

Loads the demo target (F32) and the demo draft (Q4_1) with no suffix index, has γ auto pause the
draft on rounds that lose (a draft that never paid, probed on that schedule; with
`--paid-first`, after one reply it drafted, as a bad passage would pause it), then runs the
built-in prompts of the given classes, each a new conversation, plain and γ auto alternately,
`--repeat` times. Prints one JSON object: time under auto ÷ plain time per repeat, and per reply
the probes run (tokens read first, drafted, kept) and whether speculation resumed.

    .venv/bin/python scripts/paused_draft_probe.py --repeat 2
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.bench.prompts import builtin_prompts
from app.engine import gamma
from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.events import FinishEvent
from app.engine.loop import SpeculativeEngine
from app.engine.result import GenerationResult
from app.engine.runtime import Runtime
from app.llama.config import ModelConfig
from app.metrics.rounds import RoundRecord
from models.compat import check_draft_file
from models.demo import ensure_demo_models

CLASSES = ("chat", "code", "summarise", "vietnamese", "creative", "polish")


def pause(engine: SpeculativeEngine) -> None:
    """Feed γ auto rounds whose every draft token is refused until it pauses the draft; timed
    as the demo pair runs on a 2-core CPU (a draft pass a quarter of a plain step, a row
    checked 5 % of one), so that only acceptance is forced."""
    controller = engine.gamma_controller(GenerationConfig(gamma=gamma.AUTO))
    assert controller is not None and engine.plain_step_s is not None
    step = engine.plain_step_s
    plain = RoundRecord(0, "plain", 0, 0, 0, 1, 0.0, step, 0)
    for _ in range(40):
        g = controller.next_gamma()
        refused = RoundRecord(0, "draft", g, g, 0, 1, 0.25 * step * g, step * (1 + 0.05 * g), g)
        controller.observe(refused if g else plain)
        if controller.speculation_off:
            return
    raise SystemExit("γ auto did not pause the draft")


def run(engine: SpeculativeEngine, prompt: list[int], config: GenerationConfig) -> GenerationResult:
    last = list(engine.generate(prompt, config))[-1]
    assert isinstance(last, FinishEvent)
    return last.result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--classes", default=",".join(CLASSES))
    parser.add_argument(
        "--paid-first",
        action="store_true",
        help="let the draft run one reply under γ auto before the pause (a draft that paid)",
    )
    parser.add_argument(
        "--models-dir", type=Path, default=Path.home() / ".cache" / "specchat-test-models"
    )
    args = parser.parse_args()
    demo = ensure_demo_models(folder=args.models_dir)
    prompts = builtin_prompts(tuple(args.classes.split(",")))
    auto = GenerationConfig(max_tokens=args.max_tokens, gamma=gamma.AUTO)
    plain_config = replace(auto, gamma=gamma.OFF)
    repeats: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        runtime = Runtime(vet_draft=check_draft_file, suffix_joins_models=False)
        try:
            runtime.load_target(ModelConfig(str(demo.f32), n_threads=args.threads))
            runtime.load_draft(ModelConfig(str(demo.q4_1), n_threads=args.threads))
            engine = runtime.engine
            assert engine is not None
            # One plain reply first: it times the plain step γ auto prices everything in.
            run(engine, runtime.chat_prompt([{"role": "user", "content": "Hello."}]), plain_config)
            if args.paid_first:
                ask: list[ChatMessage] = [
                    {"role": "user", "content": "Explain how a bicycle works."}
                ]
                run(engine, runtime.chat_prompt(ask), auto)
            pause(engine)
            auto_s = plain_s = 0.0
            replies = []
            for prompt in prompts:
                ids = runtime.chat_prompt([{"role": "user", "content": prompt.text}])
                plain = run(engine, ids, plain_config)
                spec = run(engine, ids, auto)
                plain_s += plain.stats.generation_s
                auto_s += spec.stats.generation_s
                probes = [
                    (round(r.draft_catchup_s * 1000, 1), r.drafted, r.accepted)
                    for r in spec.rounds
                    if r.drafted
                ]
                replies.append(
                    {
                        "prompt": prompt.name,
                        "prompt_tokens": len(ids),
                        "tokens": len(spec.token_ids),
                        "speedup": round(plain.stats.generation_s / spec.stats.generation_s, 3),
                        "rounds_drafting": len(probes),
                        "first_probes_ms_drafted_kept": probes[:4],
                        "notices": list(spec.notices),
                        "identical": spec.token_ids == plain.token_ids,
                    }
                )
            repeats.append({"auto_over_plain_time": round(auto_s / plain_s, 3), "replies": replies})
        finally:
            runtime.close()
    json.dump({"repeats": repeats}, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()

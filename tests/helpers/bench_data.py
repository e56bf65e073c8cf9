"""Scripted rounds and bench reports for UI tests that need figures but not a model run.

The rounds are the cost model's worked round table (acceptance string 111111001110101111 at
γ = 4, a draft step a tenth of a plain step, a verification as dear as a plain step), so every
figure derived from them has a known value: 20 tokens, cost 8.40, 2.38× measured.
"""

from __future__ import annotations

from pathlib import Path

from app.bench.figures import RunRecord
from app.bench.plan import BenchConfig, DraftChoice
from app.bench.prompts import BenchPrompt
from app.bench.summary import BenchReport, summarize
from app.engine.config import GenerationConfig
from app.engine.gamma import OFF, fixed
from app.engine.result import GenerationResult
from app.metrics.rounds import RoundRecord
from app.metrics.summary import summarize as summarize_stats

PLAIN_STEP_S = 0.01
SEED_ACCEPTED = (4, 2, 0, 3, 1, 4)


def round_record(
    index: int,
    drafted: int,
    accepted: int,
    *,
    step: float = PLAIN_STEP_S,
    draft_s: float | None = None,
    verify_s: float | None = None,
) -> RoundRecord:
    """A round whose draft costs 0.1 plain steps a token and whose verify costs one step,
    unless draft_s or verify_s say otherwise."""
    return RoundRecord(
        index=index,
        mode="draft" if drafted else "plain",
        gamma=drafted,
        drafted=drafted,
        accepted=accepted,
        emitted=accepted + 1,
        draft_s=drafted * 0.1 * step if draft_s is None else draft_s,
        verify_s=step if verify_s is None else verify_s,
        draft_steps=drafted,
    )


def seed_rounds() -> list[RoundRecord]:
    return [round_record(i, 4, a) for i, a in enumerate(SEED_ACCEPTED)]


def useless_rounds(n: int = 12, gamma: int = 4) -> list[RoundRecord]:
    """A draft the target never agrees with, after one plain step."""
    return [round_record(0, 0, 0), *(round_record(i, gamma, 0) for i in range(1, n))]


def result_from_rounds(rounds: list[RoundRecord]) -> GenerationResult:
    tokens = sum(r.emitted for r in rounds)
    seconds = sum(r.draft_s + r.verify_s for r in rounds)
    stats = summarize_stats(
        rounds,
        prompt_tokens=5,
        generated_tokens=tokens,
        prompt_s=0.01,
        generation_s=seconds,
        ttft_s=0.02,
        plain_step_s=PLAIN_STEP_S,
    )
    return GenerationResult(
        text="x" * tokens,
        token_ids=list(range(tokens)),
        finish_reason="length",
        mode="draft",
        stats=stats,
        rounds=tuple(rounds),
        draft_token_mask=tuple(False for _ in range(tokens)),
        plain_step_s=PLAIN_STEP_S,
    )


def run_record(
    config: int,
    rounds: list[RoundRecord],
    tokens: tuple[int, ...] | None = None,
    *,
    sequence: int = 0,
    prompt: int = 0,
    repeat: int = 0,
    prompt_class: str = "prompt",
    prompt_tokens: int = 5,
    ttft_s: float = 0.02,
) -> RunRecord:
    """A timed run made of these rounds; its tokens default to one id per emitted token."""
    return RunRecord(
        sequence=sequence,
        config=config,
        prompt=prompt,
        repeat=repeat,
        prompt_class=prompt_class,
        prompt_tokens=prompt_tokens,
        token_ids=tuple(range(sum(r.emitted for r in rounds))) if tokens is None else tokens,
        finish_reason="length",
        generation_s=sum(r.draft_s + r.verify_s for r in rounds),
        ttft_s=ttft_s,
        rounds=tuple(rounds),
    )


def seed_report() -> BenchReport:
    """Plain (20 plain steps) against one draft at γ = 4 giving a worked round table
    (acceptance 111111001110101111: 20 tokens for 8.40 plain steps)."""
    draft = DraftChoice("seed draft", Path("draft.gguf"))
    configs = [BenchConfig("plain", None, OFF), BenchConfig("seed draft γ=4", draft, fixed(4))]
    plain_rounds = [round_record(i, 0, 0) for i in range(20)]
    return summarize(
        target="target.gguf",
        configs=configs,
        prompts=[BenchPrompt("prompt", "prompt", "hello")],
        prompt_tokens=[5],
        runs=[run_record(0, plain_rounds, sequence=0), run_record(1, seed_rounds(), sequence=1)],
        base=GenerationConfig(max_tokens=20),
        repeats=1,
    )

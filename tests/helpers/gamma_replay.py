"""Replay real draft/target agreement through fixed γ and γ auto, as the bench runs them.

tests/helpers/gamma_sim.py draws acceptance from a model; real text is burstier than any simple
model (a reply of code may have one miss in 64 tokens, a Polish one eight, bunched together),
and that decides which γ pays. Here acceptance is what a real pair did: for each prompt, a
string recorded by tests/helpers/agreement.py saying where the draft's greedy guess matches the
target's greedy reply. A round of γ starting at position t keeps the run of matches from t, up
to γ; the target adds one token. Round seconds come from the pair's measured costs with timer
jitter. Prompts run in the bench's order (each prompt once per repeat, one γ auto controller for
the whole session, a new reply per prompt) and figures fold the way the bench folds them: a
class's tokens over its seconds.
"""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.engine.adaptive import GammaController
from app.engine.confidence import KeepDrafting
from app.metrics.rounds import RoundRecord
from tests.helpers.gamma_sim import PLAIN_S

FIXED_GAMMAS = (3, 5, 7)


@dataclass(frozen=True)
class Costs:
    """Round costs in plain steps: the draft's as once + per pass, verify's by rows checked."""

    draft_once: float
    draft_per_pass: float
    verify_by_rows: tuple[float, ...]  # index r - 1: r rows

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Costs:
        # Checking more rows never costs less: noise in the medians (or a row count no round
        # happened to check) takes the figure of the row count before.
        rows: list[float] = []
        for value in data["verify_by_rows"]:
            rows.append(max(value or 0.0, rows[-1] if rows else 1.0))
        return cls(data["draft_once"], data["draft_per_pass"], tuple(rows))

    def draft(self, passes: int) -> float:
        return self.draft_once + self.draft_per_pass * passes

    def verify(self, rows: int) -> float:
        return self.verify_by_rows[min(rows, len(self.verify_by_rows)) - 1]


@dataclass(frozen=True)
class Prompt:
    prompt_class: str
    agree: str  # '1' where the draft's guess is the target's token
    stops: bool  # the reply ends after the last recorded token (end of sequence)
    margins: tuple[float, ...]  # the draft's confidence margin at each position


def prompts_from_json(data: dict[str, Any]) -> list[Prompt]:
    return [
        Prompt(p["class"], p["agree"], p["finish"] == "stop", tuple(p["margins"]))
        for p in data["prompts"]
    ]


Chooser = Callable[[], int]
Observer = Callable[[RoundRecord, Sequence[float]], None]
StopRule = Callable[[], KeepDrafting | None]


def _kept(agree: str, start: int, gamma: int) -> int:
    """Draft tokens a round of γ from `start` keeps: the run of matches, up to γ."""
    run = agree[start : start + gamma]
    miss = run.find("0")
    return len(run) if miss < 0 else miss


def _no_stop() -> KeepDrafting | None:
    return None


def _ignore(_record: RoundRecord, _margins: Sequence[float]) -> None:
    pass


def replay_reply(
    prompt: Prompt,
    max_tokens: int,
    choose: Chooser,
    observe: Observer,
    *,
    costs: Costs,
    rng: random.Random,
    jitter: float = 0.08,
    draft_stop: StopRule = _no_stop,
) -> tuple[int, float]:
    """One reply; returns (tokens, seconds). Like the engine, never drafts past the budget,
    and ends a round's draft where its stop rule (if any) says, after the token it doubts."""
    end = len(prompt.agree) if prompt.stops else max_tokens
    end = min(end, max_tokens, len(prompt.agree))
    produced, seconds, index = 0, 0.0, 0
    while produced < end:
        gamma = max(0, min(choose(), max_tokens - produced - 1))
        stop = draft_stop() if gamma else None
        drafted = gamma
        if stop is not None:
            # Past the recorded text (an end of sequence) nothing is known to stop the draft.
            known = prompt.margins[produced : produced + gamma]
            drafted = next((k for k, m in enumerate(known, 1) if not stop(m)), gamma)
        if drafted == 0:
            draft_s, verify_s, accepted = 0.0, costs.verify(1) * PLAIN_S, 0
        else:
            accepted = _kept(prompt.agree, produced, drafted)
            draft_s = costs.draft(drafted) * PLAIN_S
            verify_s = costs.verify(drafted + 1) * PLAIN_S
        draft_s *= 1.0 + rng.uniform(-jitter, jitter)
        verify_s *= 1.0 + rng.uniform(-jitter, jitter)
        emitted = min(accepted + 1, end - produced)
        mode = "draft" if drafted else "plain"
        record = RoundRecord(
            index, mode, gamma, drafted, accepted, emitted, draft_s, verify_s, drafted
        )
        observe(record, prompt.margins[produced : produced + drafted] if stop else ())
        produced += emitted
        seconds += draft_s + verify_s
        index += 1
    return produced, seconds


def class_totals(
    prompts: Sequence[Prompt],
    costs: Costs,
    gamma: int | None,
    *,
    max_tokens: int,
    repeats: int,
    seed: int = 0,
    confidence_stop: bool = True,
) -> dict[str, tuple[int, float]]:
    """(tokens, seconds) by class of one bench-like session, a fixed γ or (None) γ auto,
    with its confidence stop as the engine runs it for a draft model, or without."""
    rng = random.Random(seed)
    controller = None
    if gamma is None:
        controller = GammaController(initial_gamma=5, confidence_stop=confidence_stop)
        controller.note_plain_step(PLAIN_S)
    totals: dict[str, tuple[int, float]] = defaultdict(lambda: (0, 0.0))
    for _ in range(repeats):
        for prompt in prompts:
            choose: Chooser
            observe: Observer
            draft_stop: StopRule = _no_stop
            if controller is not None:
                controller.begin_reply()
                choose, observe = controller.next_gamma, controller.observe
                draft_stop = controller.draft_stop
            else:
                choose, observe = functools.partial(int, gamma), _ignore
            tokens, seconds = replay_reply(
                prompt, max_tokens, choose, observe, costs=costs, rng=rng, draft_stop=draft_stop
            )
            done, spent = totals[prompt.prompt_class]
            totals[prompt.prompt_class] = (done + tokens, spent + seconds)
    return totals


def auto_share_of_best_fixed(
    prompts: Sequence[Prompt],
    costs: Costs,
    *,
    max_tokens: int,
    repeats: int,
    seeds: int = 3,
    confidence_stop: bool = True,
) -> tuple[float, dict[str, float]]:
    """γ auto's tokens per second as a share of the best fixed γ's, overall and by class;
    each configuration's sessions under `seeds` different jitters are pooled."""

    def pooled(gamma: int | None) -> dict[str, tuple[int, float]]:
        out: dict[str, tuple[int, float]] = defaultdict(lambda: (0, 0.0))
        for seed in range(seeds):
            run = class_totals(
                prompts,
                costs,
                gamma,
                max_tokens=max_tokens,
                repeats=repeats,
                seed=seed,
                confidence_stop=confidence_stop,
            )
            for c, (tokens, seconds) in run.items():
                out[c] = (out[c][0] + tokens, out[c][1] + seconds)
        return out

    def rate(totals: Sequence[tuple[int, float]]) -> float:
        return sum(t for t, _ in totals) / sum(s for _, s in totals)

    auto = pooled(None)
    fixed = [pooled(g) for g in FIXED_GAMMAS]
    by_class = {c: rate([auto[c]]) / max(rate([f[c]]) for f in fixed) for c in auto}
    overall = rate(list(auto.values())) / max(rate(list(f.values())) for f in fixed)
    return overall, by_class

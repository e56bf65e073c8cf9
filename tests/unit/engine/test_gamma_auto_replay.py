"""γ auto on real text: the demo pair's recorded agreement replayed as the bench runs it.

The data files hold, for every prompt, where the demo draft's greedy guess matches the demo
target's greedy reply, the draft's confidence margin at every position, and the pair's measured
round costs (tests/helpers/agreement.py wrote them; regenerate with `python -m
tests.helpers.agreement tests/data/demo_agreement.json` and `...
tests/data/demo_agreement_more.json --prompts tests/data/more_prompts.json`). The first set is
the bench's built-in prompts; the second, other prompts of the same classes, so that a change
cannot fit the bench's thirteen texts alone.

γ auto is replayed as the engine runs it for a draft model, with its confidence stop, and as it
runs prompt lookup, without. The bench asks γ auto for 97 % of the best fixed γ (3, 5, 7)
overall and 95 % in every class. Without the stop, overall is held to that here. A class is two
prompts, and which round a lone miss falls in moves its figure by several points either way for
any controller (a change that leaves overall and most classes alone can move one class from
99 % to 94 %), so the bound per class is 93 %: it still fails a controller that prices a new
prompt at the level of the ones before it (86.9 % on Polish). With the stop, auto must beat the
best fixed γ (bounds below).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine import adaptive
from tests.helpers.gamma_replay import Costs, Prompt, auto_share_of_best_fixed, prompts_from_json

DATA = Path(__file__).resolve().parents[2] / "data"
SETS = ("demo_agreement.json", "demo_agreement_more.json")
LENGTHS = ((64, 4), (256, 2))  # (max tokens, repeats), as in docs/benchmarks.md
OVERALL = 0.97
EVERY_CLASS = 0.93
# With the confidence stop auto drafts to where the draft doubts, which no fixed γ can: it
# must beat the best fixed γ outright (it measured 107.6-110.0 % overall, no class under 98 %).
STOP_OVERALL = 1.04
STOP_EVERY_CLASS = 0.97


def _load(name: str) -> tuple[list[Prompt], Costs]:
    data = json.loads((DATA / name).read_text(encoding="utf-8"))
    return prompts_from_json(data), Costs.from_json(data["costs"])


@pytest.mark.parametrize(
    ("confidence_stop", "bounds"),
    [(True, (STOP_OVERALL, STOP_EVERY_CLASS)), (False, (OVERALL, EVERY_CLASS))],
    ids=["stop", "no-stop"],
)
@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize(("max_tokens", "repeats"), LENGTHS)
def test_auto_keeps_up_with_the_best_fixed_gamma_in_every_class(
    name: str, max_tokens: int, repeats: int, confidence_stop: bool, bounds: tuple[float, float]
) -> None:
    """With the confidence stop, as auto runs a draft model, and without, as it runs prompt
    lookup (whose proposals carry no confidence)."""
    prompts, costs = _load(name)
    overall, by_class = auto_share_of_best_fixed(
        prompts, costs, max_tokens=max_tokens, repeats=repeats, confidence_stop=confidence_stop
    )
    shares = {c: round(s, 3) for c, s in by_class.items()}
    assert overall >= bounds[0], (overall, shares)
    assert min(by_class.values()) >= bounds[1], shares


def test_the_replay_catches_auto_blind_to_the_text_at_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the text's own difficulty (a prior no reply can move), γ auto prices every
    prompt at the level of the ones before it, which the replay of the built-in set shows
    where the level chooses γ: without the confidence stop."""
    monkeypatch.setattr(adaptive, "_DIFFICULTY_PRIOR", 1e9)
    prompts, costs = _load(SETS[0])
    worst = min(
        min(
            auto_share_of_best_fixed(
                prompts, costs, max_tokens=n, repeats=r, confidence_stop=False
            )[1].values()
        )
        for n, r in LENGTHS
    )
    assert worst < EVERY_CLASS

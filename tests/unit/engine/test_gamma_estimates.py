"""γ auto's running estimates: what a round of drafting costs by its passes, and the cautious
acceptance the resume rule reads."""

from __future__ import annotations

import pytest

from app.engine.gamma_estimates import Acceptance, DraftCost, TextDifficulty


def cost_of(rounds: list[tuple[int, float]]) -> DraftCost:
    cost = DraftCost(horizon=16, fade=1.0)
    for passes, seconds in rounds:
        cost.add(passes, seconds)
    return cost


def test_a_per_round_part_is_found_and_longer_rounds_are_not_overcharged() -> None:
    # 0.4 once per round plus 0.4 per pass, measured at 5 and 6 passes only.
    cost = cost_of([(5, 2.4), (6, 2.8), (5, 2.4), (6, 2.8)])
    predicted = cost.predict_up_to(9)
    assert predicted[9 - 1] == pytest.approx(0.4 + 9 * 0.4)
    assert predicted[1 - 1] == pytest.approx(0.8)
    # Pricing each pass at the mean of the rounds run (about 0.47) would charge 9 passes 4.25.
    assert predicted[9 - 1] < 9 * (2.4 + 2.8) / 11 - 0.2


def test_one_measured_length_prices_the_others_in_proportion() -> None:
    cost = cost_of([(4, 2.0), (4, 2.2)])
    assert cost.measured
    assert cost.predict_up_to(8) == pytest.approx([0.525 * n for n in range(1, 9)])


def test_a_line_that_would_charge_a_round_less_than_nothing_falls_back_to_proportion() -> None:
    # Noise: the longer round looks much dearer per pass than the shorter one.
    cost = cost_of([(2, 0.4), (4, 2.0)])
    predicted = cost.predict_up_to(4)
    assert all(p > 0 for p in predicted)
    per_pass = (2 * 0.4 + 4 * 2.0) / (2 * 2 + 4 * 4)
    assert predicted == pytest.approx([per_pass * n for n in range(1, 5)])


def test_nothing_measured_is_said_so() -> None:
    assert not DraftCost(horizon=16, fade=1.0).measured


def test_eight_kept_out_of_eight_is_trusted_enough_to_resume_an_expensive_draft() -> None:
    probes = Acceptance(decay=1.0)
    for _ in range(8):
        probes.add(3, 3)
    cautious = probes.cautious(3, 1.0)
    # A draft costing half a plain step per pass needs about 0.85 per position to beat plain
    # by 5 % at γ 3; the uniform prior capped this at 0.81.
    assert all(0.85 < a < 1.0 for a in cautious)
    # Untried positions stay worth little.
    assert probes.cautious(5, 1.0)[4] < 0.2


def test_text_difficulty_starts_at_the_long_run_level() -> None:
    difficulty = TextDifficulty(prior=3.0, fade=0.93)
    assert difficulty.factor == 1.0
    assert difficulty.scale([0.9, 0.95]) == pytest.approx([0.9, 0.95])


def test_clean_rounds_lower_the_miss_rate_and_misses_raise_it() -> None:
    clean = TextDifficulty(prior=3.0, fade=1.0)
    for _ in range(4):
        clean.add(False, 0.5)  # a round the long-run figures expected half a miss from
    assert clean.factor == pytest.approx(3.0 / 5.0)
    assert clean.scale([0.9])[0] == pytest.approx(1.0 - 0.1 * 0.6)
    rough = TextDifficulty(prior=3.0, fade=1.0)
    for _ in range(3):
        rough.add(True, 0.25)
    assert rough.factor == pytest.approx(6.0 / 3.75)
    # A miss rate scaled past certainty is no acceptance at all, not a negative one.
    assert rough.scale([0.2])[0] == 0.0


def test_old_evidence_on_the_text_fades() -> None:
    difficulty = TextDifficulty(prior=3.0, fade=0.5)
    difficulty.add(True, 0.0)
    for _ in range(20):
        difficulty.add(False, 0.0)  # rounds that taught nothing either way
    assert difficulty.factor == pytest.approx(1.0, abs=1e-5)
    difficulty.add(True, 1.0)
    difficulty.clear()
    assert difficulty.factor == 1.0

"""Pass costs carried across context depth: learned only as far as the passes prove it."""

from __future__ import annotations

import random

import pytest

from app.engine.adaptive import GammaController
from app.engine.depth_cost import DepthSlope
from app.engine.gamma_estimates import VerifyCurve
from app.metrics.rounds import RoundRecord

# Shaped like the demo target on 2 threads without flash attention: seconds of a pass by rows at
# depth 0, growing by GROWTH of itself per token of depth.
BASE = {1: 0.020, 2: 0.025, 4: 0.030, 8: 0.041}
GROWTH = 1.5e-4


def true_cost(rows: int, depth: int) -> float:
    return BASE[rows] * (1.0 + GROWTH * depth)


def curve_over(depths: range, rng: random.Random, noise: float = 0.03) -> VerifyCurve:
    curve = VerifyCurve(horizon=16, fade=1.0 - 1.0 / 128)
    for depth in depths:
        rows = rng.choice(list(BASE))
        curve.add(rows, true_cost(rows, depth) * rng.gauss(1.0, noise), depth)
    return curve


@pytest.mark.parametrize("seed", range(5))
def test_costs_timed_deep_in_a_long_conversation_are_priced_at_the_next_one_s_start(
    seed: int,
) -> None:
    curve = curve_over(range(100, 2100, 4), random.Random(seed))
    curve.depth = 50
    for rows in BASE:
        predicted = curve.predict(rows)
        assert predicted == pytest.approx(true_cost(rows, 50), rel=0.10)
        # What the samples alone say, the price before depth was learned: far off.
        blind = curve.means[rows].value
        assert blind > 1.2 * true_cost(rows, 50)


@pytest.mark.parametrize("seed", range(20))
def test_a_reply_s_own_spread_of_depths_never_carries_a_price_past_the_truth(seed: int) -> None:
    # 130 tokens of depth move a one-row pass by 2 %, inside the timing noise: what slope they
    # prove is a lower bound, so a price carried a long way errs towards ignoring depth.
    curve = curve_over(range(200, 330), random.Random(seed), noise=0.05)
    for far in (0, 3000):
        curve.depth = far
        for rows in BASE:
            error = curve.predict(rows) / true_cost(rows, far) - 1.0
            blind_error = curve.means[rows].value / true_cost(rows, far) - 1.0
            assert abs(error) <= abs(blind_error) + 0.05


@pytest.mark.parametrize("seed", range(5))
def test_timing_noise_over_a_wide_spread_of_depths_proves_no_slope(seed: int) -> None:
    rng = random.Random(seed)
    slope = DepthSlope(fade=1.0 - 1.0 / 128)
    for depth in range(0, 2000, 4):
        rows = rng.choice(list(BASE))
        slope.add(rows, depth, BASE[rows] * rng.gauss(1.0, 0.05))
    assert slope.factor(2000, 0) > 0.95


def test_a_price_carried_far_never_falls_below_half_of_what_was_measured() -> None:
    slope = DepthSlope(fade=1.0)
    for depth in range(0, 4000, 8):
        slope.add(1, depth, 0.01 * (1.0 + 1e-3 * depth))
    assert slope.slope > 0.0
    assert slope.factor(4000, 0) == 0.5


def test_a_plain_step_is_priced_where_the_next_reply_begins() -> None:
    controller = GammaController()
    for depth in range(100, 2100, 4):
        controller.observe(
            RoundRecord(0, "plain", 0, 0, 0, 1, 0.0, true_cost(1, depth), 0, depth=depth)
        )
    deep = controller.plain_step_s
    assert deep == pytest.approx(true_cost(1, 2096), rel=0.05)
    controller.begin_reply(50)
    assert controller.plain_step_s == pytest.approx(true_cost(1, 50), rel=0.05)

"""The cost model of speculative decoding (Leviathan et al., 2023): E(α, γ), round cost and
speedup against hand-worked reference values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.metrics.cost_model import (
    MAX_GAMMA,
    best_gamma,
    ceiling_fraction,
    expected_tokens,
    expected_tokens_by_length,
    expected_tokens_by_position,
    passes_per_token,
    round_cost,
    speedup,
)
from tests.helpers.round_table import (
    parse_acceptance_string,
    round_table,
    round_table_from_records,
)

alphas = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
gammas = st.integers(min_value=0, max_value=64)
costs = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


def r(x: float | None, places: int) -> float:
    assert x is not None
    return round(x, places)


# --- reference values -------------------------------------------------------------------------


def test_default_round_alpha_08_gamma_4() -> None:
    assert r(expected_tokens(0.8, 4), 3) == 3.362
    assert r(round_cost(4, 0.10, 1.0), 2) == 1.40
    assert r(speedup(0.8, 4, 0.10, 1.0), 2) == 2.40
    assert r(passes_per_token(0.8, 4, 0.10, 1.0), 3) == 0.416
    assert r(100 * ceiling_fraction(0.8, 4), 1) == 67.2


def test_long_draft_alpha_08_gamma_32_is_worse() -> None:
    assert r(expected_tokens(0.8, 32), 3) == 4.997
    assert r(round_cost(32, 0.10), 2) == 4.20
    assert r(speedup(0.8, 32, 0.10), 2) == 1.19


def test_best_gamma_default_figures() -> None:
    choice = best_gamma(0.8, 0.10, 1.0)
    assert choice.gamma == 6
    assert r(choice.speedup, 2) == 2.47
    assert len(choice.curve) == MAX_GAMMA + 1  # the sweep runs γ = 0..MAX_GAMMA
    assert choice.curve[6] == choice.speedup
    assert not choice.peak_beyond_sweep
    assert choice.message is None
    assert choice.speculate


@pytest.mark.parametrize(("alpha", "gamma"), [(0.4, 2), (0.8, 6), (0.9, 10), (0.95, 15)])
def test_best_gamma_moves_right_with_acceptance(alpha: float, gamma: int) -> None:
    assert best_gamma(alpha, 0.10).gamma == gamma


@pytest.mark.parametrize(("c_draft", "gamma"), [(0.01, 14), (0.10, 6), (0.25, 3), (0.99, 0)])
def test_best_gamma_moves_left_with_draft_cost(c_draft: float, gamma: int) -> None:
    assert best_gamma(0.8, c_draft).gamma == gamma


def test_expensive_draft_says_do_not_speculate() -> None:
    choice = best_gamma(0.8, 0.99)
    assert choice.gamma == 0
    assert not choice.speculate
    assert choice.speedup == 1.0
    assert choice.message is not None
    assert "do not speculate" in choice.message


def test_free_draft_peak_lies_beyond_sweep() -> None:
    choice = best_gamma(0.8, 0.0, max_gamma=32)  # the reference sweep runs to 32
    assert choice.gamma == 32
    assert r(choice.speedup, 2) == 5.00
    assert choice.peak_beyond_sweep
    assert choice.message is not None
    assert "beyond the sweep" in choice.message
    assert all(a < b for a, b in zip(choice.curve, choice.curve[1:], strict=False))


def test_dearer_verify_moves_peak_right() -> None:
    assert best_gamma(0.8, 0.10, 1.5).gamma == 7


def test_callable_verify_cost_is_priced_per_gamma() -> None:
    def linear(gamma: int) -> float:
        return 0.75 + 0.125 * (gamma + 1)

    assert round_cost(4, 0.1, linear) == pytest.approx(0.4 + 0.75 + 0.625)
    choice = best_gamma(0.8, 0.10, linear)
    by_hand = [expected_tokens(0.8, g) / (g * 0.10 + linear(g)) for g in range(MAX_GAMMA + 1)]
    assert choice.curve == pytest.approx(tuple(by_hand))
    assert choice.gamma == max(range(MAX_GAMMA + 1), key=lambda g: by_hand[g])
    # A verify pass that grows with γ must pull the peak left of the flat-cost peak (6).
    assert choice.gamma < 6


def test_max_gamma_limits_the_sweep() -> None:
    choice = best_gamma(0.95, 0.10, max_gamma=12)
    assert len(choice.curve) == 13
    assert choice.gamma == 12
    assert choice.peak_beyond_sweep


def test_draft_as_dear_as_target_speedup_is_ceiling_fraction() -> None:
    for alpha in (0.0, 0.3, 0.8, 1.0):
        for gamma in (0, 1, 4, 32):
            s = speedup(alpha, gamma, 1.0, 1.0)
            assert s == pytest.approx(ceiling_fraction(alpha, gamma))
            assert s <= 1.0 + 1e-12


# --- special cases and validation --------------------------------------------------------------


def test_special_cases_do_not_produce_nan() -> None:
    assert expected_tokens(1.0, 7) == 8.0
    assert expected_tokens(0.0, 7) == 1.0
    assert expected_tokens(0.5, 0) == 1.0
    assert expected_tokens(1.0, 0) == 1.0
    assert expected_tokens(1.0 - 1e-13, 5) == pytest.approx(6.0, abs=1e-9)
    assert expected_tokens(1.0 - 1e-10, 5) == pytest.approx(6.0, abs=1e-7)


def test_infinite_gamma_limit() -> None:
    assert expected_tokens(0.8, 2000) == pytest.approx(5.0)


@pytest.mark.parametrize("alpha", [-0.01, 1.01, math.nan])
def test_rejects_acceptance_outside_unit_interval(alpha: float) -> None:
    with pytest.raises(ValueError, match="acceptance"):
        expected_tokens(alpha, 3)


def test_rejects_bad_gamma_and_costs() -> None:
    with pytest.raises(ValueError, match="draft length"):
        expected_tokens(0.5, -1)
    with pytest.raises(ValueError, match="c_draft"):
        round_cost(2, -0.1)
    with pytest.raises(ValueError, match="verify cost"):
        round_cost(2, 0.1, 0.0)
    with pytest.raises(ValueError, match="verify cost"):
        best_gamma(0.5, 0.1, lambda g: 1.0 - 0.1 * g, max_gamma=12)


def test_by_position_matches_definition() -> None:
    assert expected_tokens_by_position([]) == 1.0
    assert expected_tokens_by_position([0.9, 0.5, 0.2]) == pytest.approx(
        1 + 0.9 + 0.9 * 0.5 + 0.9 * 0.5 * 0.2
    )
    with pytest.raises(ValueError, match="acceptance"):
        expected_tokens_by_position([0.5, 1.5])


# --- round tables -------------------------------------------------------------------------------


def test_seed_acceptance_string_table() -> None:
    table = round_table("111111001110101111", 4, 0.10)
    assert [(row.accepted, row.rejected_at) for row in table.rows] == [
        (4, None),
        (2, 3),
        (0, 1),
        (3, 4),
        (1, 2),
        (4, None),
    ]
    assert [row.tokens for row in table.rows] == [5, 3, 1, 4, 2, 5]
    assert [row.cumulative_tokens for row in table.rows] == [5, 8, 9, 13, 15, 20]
    assert [row.cumulative_draft_passes for row in table.rows] == [4, 8, 12, 16, 20, 24]
    assert [row.cumulative_target_passes for row in table.rows] == [1, 2, 3, 4, 5, 6]
    assert [round(row.cumulative_cost, 2) for row in table.rows] == [
        1.40,
        2.80,
        4.20,
        5.60,
        7.00,
        8.40,
    ]
    assert all(row.drafted == 4 for row in table.rows)
    assert table.rounds == 6
    assert table.tokens == 20
    assert table.target_passes == 6
    assert table.draft_passes == 24
    assert r(table.cost, 2) == 8.40
    assert r(table.tokens_per_round, 3) == 3.333
    assert r(table.speedup, 2) == 2.38
    assert (table.accepted_flags, table.read_flags) == (14, 18)
    assert r(100 * (table.acceptance or 0.0), 1) == 77.8
    assert table.unused_flags == 0


def test_all_ones_string_accepts_everything() -> None:
    table = round_table("1" * 12, 4, 0.10)
    assert table.rounds == 3
    assert table.tokens == 15
    assert table.acceptance == 1.0


def test_trailing_flags_that_finish_no_round_are_reported() -> None:
    rounds, unused = parse_acceptance_string("1111011", 4)
    assert rounds == [(4, 4), (4, 0)]
    assert unused == 2
    table = round_table("1111011", 4, 0.1)
    assert table.unused_flags == 2
    assert table.read_flags == 5


def test_empty_string_gives_empty_table() -> None:
    table = round_table("", 4, 0.1)
    assert table.rounds == 0
    assert table.tokens_per_round is None
    assert table.speedup is None
    assert table.acceptance is None


def test_round_table_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="only 1 and 0"):
        round_table("1102", 4, 0.1)
    with pytest.raises(ValueError, match="γ >= 1"):
        round_table("1", 0, 0.1)


def test_table_from_records_matches_string_table() -> None:
    from_string = round_table("111111001110101111", 4, 0.10)
    from_records = round_table_from_records([(4, 4), (4, 2), (4, 0), (4, 3), (4, 1), (4, 4)], 0.10)
    assert from_records == from_string


def test_table_from_records_prices_each_round_at_its_gamma() -> None:
    def linear(gamma: int) -> float:
        return 1.0 + 0.1 * gamma

    table = round_table_from_records([(2, 2), (5, 1), (0, 0)], 0.2, linear)
    assert [row.tokens for row in table.rows] == [3, 2, 1]
    assert table.draft_passes == 7
    assert table.cost == pytest.approx((0.4 + 1.2) + (1.0 + 1.5) + 1.0)
    assert table.rows[2].rejected_at is None
    assert (table.accepted_flags, table.read_flags) == (3, 4)
    with pytest.raises(ValueError, match="outside"):
        round_table_from_records([(2, 3)], 0.1)


# --- properties ------------------------------------------------------------------------------


@given(alphas, gammas)
def test_expected_tokens_bounds(alpha: float, gamma: int) -> None:
    e = expected_tokens(alpha, gamma)
    assert not math.isnan(e)
    # The geometric sum: one token at least (the target's own), one per row at most, and each
    # extra draft position adds exactly α^(γ+1).
    assert e == pytest.approx(math.fsum(alpha**i for i in range(gamma + 1)), rel=1e-9, abs=1e-9)
    assert expected_tokens(alpha, gamma + 1) - e == pytest.approx(alpha ** (gamma + 1), abs=1e-9)


@given(alphas, alphas, gammas)
def test_expected_tokens_monotone_in_alpha(a: float, b: float, gamma: int) -> None:
    lo, hi = sorted((a, b))
    assert expected_tokens(lo, gamma) <= expected_tokens(hi, gamma) * (1 + 1e-12)


@given(alphas, gammas)
def test_expected_tokens_monotone_in_gamma(alpha: float, gamma: int) -> None:
    assert expected_tokens(alpha, gamma) <= expected_tokens(alpha, gamma + 1) * (1 + 1e-12)


@given(alphas, gammas)
def test_closed_form_equals_series(alpha: float, gamma: int) -> None:
    series = math.fsum(alpha**i for i in range(gamma + 1))
    assert expected_tokens(alpha, gamma) == pytest.approx(series, rel=1e-9)
    assert expected_tokens_by_position([alpha] * gamma) == pytest.approx(series, rel=1e-9)


@given(alphas, gammas, costs, st.floats(min_value=0.01, max_value=5.0))
def test_speedup_and_passes_per_token_are_reciprocal(
    alpha: float, gamma: int, c_draft: float, c_verify: float
) -> None:
    s = speedup(alpha, gamma, c_draft, c_verify)
    assert s * passes_per_token(alpha, gamma, c_draft, c_verify) == pytest.approx(1.0)
    assert 0.0 < ceiling_fraction(alpha, gamma) <= 1.0


@given(alphas, costs, st.floats(min_value=0.1, max_value=3.0))
def test_best_gamma_is_the_curve_maximum(alpha: float, c_draft: float, c_verify: float) -> None:
    choice = best_gamma(alpha, c_draft, c_verify, max_gamma=16)
    # The curve recomputed here from the formula as written, not from the module's functions.
    by_hand = [sum(alpha**i for i in range(g + 1)) / (g * c_draft + c_verify) for g in range(17)]
    best = max(by_hand)
    assert choice.speedup == pytest.approx(best, rel=1e-9)
    assert by_hand[choice.gamma] == pytest.approx(best, rel=1e-9)
    assert choice.curve == pytest.approx(by_hand, rel=1e-9)
    # Ties go to the shorter draft: the first γ of the curve that reaches its maximum.
    assert choice.gamma == choice.curve.index(max(choice.curve))
    assert choice.peak_beyond_sweep == (choice.gamma == 16)


@given(st.text(alphabet="01", max_size=60), st.integers(min_value=1, max_value=8), costs)
def test_round_never_yields_fewer_tokens_per_target_pass_than_plain(
    flags: str, gamma: int, c_draft: float
) -> None:
    table = round_table(flags, gamma, c_draft)
    assert all(1 <= row.tokens <= gamma + 1 for row in table.rows)
    assert table.tokens >= table.target_passes
    assert table.tokens == table.accepted_flags + table.rounds
    assert table.read_flags + table.unused_flags == len(flags)
    assert table.accepted_flags == flags[: table.read_flags].count("1")
    assert table.draft_passes == gamma * table.rounds


def test_expected_tokens_by_length_gives_every_prefix() -> None:
    acceptances = [0.9, 0.7, 0.4, 0.0, 0.5]
    by_length = expected_tokens_by_length(acceptances)
    assert len(by_length) == 6
    assert by_length[0] == 1.0
    for gamma in range(6):
        assert by_length[gamma] == expected_tokens_by_position(acceptances[:gamma])
    assert expected_tokens_by_length([0.8] * 4)[4] == pytest.approx(expected_tokens(0.8, 4))

"""γ auto's confidence stop: the margin table, the per-round rule, and the controller's use."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.adaptive import GammaController
from app.engine.confidence import KeptByMargin, SurvivalStop, margin_bin, survival_threshold
from app.engine.sampling import confidence_margin, logit_margin
from app.metrics.cost_model import MAX_GAMMA
from app.metrics.rounds import RoundRecord

PLAIN_S = 0.02
SURE, TIE = 0.9, 0.003


def test_the_margin_is_the_favourite_minus_the_runner_up() -> None:
    assert confidence_margin(np.array([0.2, 0.5, 0.3])) == pytest.approx(0.2)
    assert confidence_margin(np.array([0.5, 0.5])) == 0.0
    assert confidence_margin(np.array([1.0])) == 1.0


def test_the_margin_from_logits_is_the_margin_of_their_softmax() -> None:
    logits = np.random.default_rng(7).normal(size=1000).astype(np.float32) * 3
    soft = np.exp(logits.astype(np.float64) - logits.max())
    assert logit_margin(logits) == pytest.approx(confidence_margin(soft / soft.sum()), rel=1e-5)


def test_only_judged_tokens_count() -> None:
    table = KeptByMargin(decay=1.0)
    # The first token kept, the second rejected, the third never judged.
    table.add([SURE, TIE, 0.3], accepted=1)
    assert table.tried[margin_bin(SURE)] == 1.0
    assert table.kept[margin_bin(SURE)] == 1.0
    assert table.tried[margin_bin(TIE)] == 1.0
    assert table.kept[margin_bin(TIE)] == 0.0
    assert table.tried[margin_bin(0.3)] == 0.0


def test_an_unmeasured_bin_is_priced_at_the_average_and_trials_move_a_bin() -> None:
    table = KeptByMargin(decay=1.0)
    for _ in range(20):
        table.add([SURE, TIE], accepted=1)
    kept = table.survival(average=0.9)
    assert kept[margin_bin(0.3)] == pytest.approx(0.9)
    assert kept[margin_bin(SURE)] > 0.99
    assert kept[margin_bin(TIE)] < 0.1


def test_the_round_goes_on_while_its_tokens_are_likely_to_all_survive() -> None:
    kept = [0.5] * margin_bin(0.0) + [0.5] * (margin_bin(SURE) - margin_bin(0.0)) + [0.99]
    stop = SurvivalStop(kept, threshold=0.75)
    assert all(stop(SURE) for _ in range(10))  # 0.99^10 ≈ 0.90
    assert not stop(TIE)  # one near-tie halves the chance


def test_one_more_token_must_make_more_than_its_time_at_the_running_rate() -> None:
    # A pass and a row cost 0.5 plain steps; speculation makes 1.5 tokens a plain step, so the
    # next token must add 0.75 tokens: survive with at least 0.75 / 0.95.
    assert survival_threshold(0.5, 1.5, 0.95) == pytest.approx(0.75 / 0.95)
    assert survival_threshold(0.5, 1.5, 0.0) == float("inf")


def _taught(confidence_stop: bool, overhead_s: float = 0.0) -> GammaController:
    """A controller after rounds where confident tokens were kept and near-ties rejected;
    each round spent `overhead_s` outside its passes."""
    controller = GammaController(
        max_gamma=MAX_GAMMA, initial_gamma=5, confidence_stop=confidence_stop
    )
    controller.note_plain_step(PLAIN_S)
    for i in range(40):
        gamma = controller.next_gamma()
        margins = [SURE] * 5 + [TIE] if i % 2 else [SURE] * 6
        accepted = 5 if i % 2 else 6
        draft_s, verify_s = PLAIN_S * (0.3 + 0.4 * 6), PLAIN_S * 2.0
        record = RoundRecord(
            i,
            "draft",
            gamma,
            6,
            accepted,
            accepted + 1,
            draft_s,
            verify_s,
            6,
            overhead_s=overhead_s,
        )
        controller.observe(record, margins)
    return controller


def test_with_the_stop_gamma_is_a_ceiling_and_a_near_tie_ends_the_draft() -> None:
    controller = _taught(confidence_stop=True)
    assert controller.next_gamma() == MAX_GAMMA
    stop = controller.draft_stop()
    assert stop is not None
    assert all(stop(SURE) for _ in range(4))
    assert not stop(TIE)


def test_without_the_stop_rounds_run_the_chosen_length() -> None:
    controller = _taught(confidence_stop=False)
    assert controller.next_gamma() < MAX_GAMMA
    assert controller.draft_stop() is None


def test_a_token_is_priced_at_the_rate_the_rounds_delivered() -> None:
    # The same rounds, but in one session each also spent as long again outside its passes:
    # they delivered half the rate, so half as likely a token still pays for its pass and row.
    # (The predicted rate reads passes only and would price both alike.)
    lean, slow = _taught(True), _taught(True, overhead_s=PLAIN_S * 4.7)
    for controller in (lean, slow):
        assert controller.next_gamma() == MAX_GAMMA
    lean_stop, slow_stop = lean.draft_stop(), slow.draft_stop()
    assert isinstance(lean_stop, SurvivalStop) and isinstance(slow_stop, SurvivalStop)
    assert slow_stop.threshold == pytest.approx(lean_stop.threshold / 2)

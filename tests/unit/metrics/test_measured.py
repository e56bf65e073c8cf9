"""The one home of the arithmetic read from rounds (app/metrics/measured.py, ledger.py and the
cost model's fit): each derivation on hand-made rounds whose answers are worked out by hand."""

from __future__ import annotations

import json

import pytest

from app.metrics import measured as m
from app.metrics.cost_model import VerifyLine, fit_verify_line
from app.metrics.ledger import ledger
from app.metrics.rounds import RoundRecord
from app.metrics.summary import summarize

STEP = 0.02  # seconds of one plain step


def rec(
    gamma: int,
    drafted: int,
    accepted: int,
    *,
    draft_s: float = 0.0,
    verify_s: float = STEP,
    steps: int | None = None,
    emitted: int | None = None,
) -> RoundRecord:
    return RoundRecord(
        index=0,
        mode="draft" if drafted else "plain",
        gamma=gamma,
        drafted=drafted,
        accepted=accepted,
        emitted=accepted + 1 if emitted is None else emitted,
        draft_s=draft_s,
        verify_s=verify_s,
        draft_steps=drafted if steps is None else steps,
    )


def test_only_judged_positions_are_trials() -> None:
    rounds = [rec(3, 3, 3), rec(3, 3, 1), rec(3, 3, 0)]
    # Position 1: judged 3 times, kept twice. Position 2: judged twice (rounds 1, 2), kept once.
    # Position 3: judged once (round 1), kept. Round 3 never reached positions 2 and 3.
    assert m.conditional_acceptance(rounds) == [2 / 3, 1 / 2, 1.0]
    assert m.judged_acceptance(rounds) == pytest.approx(4 / 6)
    assert m.judged_positions(3, 3) == 3 and m.judged_positions(3, 1) == 2
    assert m.conditional_acceptance([]) == [] and m.judged_acceptance([]) is None


def test_c_draft_bills_every_pass_paid_and_prompt_lookup_per_token() -> None:
    spec = rec(4, 4, 2, draft_s=4 * 0.1 * STEP)
    # The p_min stop: three passes ran, nothing was proposed, the round ran plain.
    stopped = rec(4, 0, 0, draft_s=3 * 0.1 * STEP, steps=3)
    assert m.c_draft([spec, stopped], STEP) == pytest.approx(0.1)
    lookup = rec(5, 5, 5, draft_s=0.01 * STEP, steps=0)
    assert m.c_draft([lookup], STEP) == pytest.approx(0.002)  # per proposed token
    assert m.c_draft([spec], None) is None
    assert m.c_draft([rec(0, 0, 0)], STEP) is None


def test_c_verify_and_the_plain_step_come_from_their_own_rounds() -> None:
    rounds = [
        rec(0, 0, 0, verify_s=0.02),
        rec(0, 0, 0, verify_s=0.04),
        rec(2, 2, 1, verify_s=0.045),
    ]
    assert m.plain_step_s(rounds) == pytest.approx(0.03)
    assert m.c_verify(rounds, 0.03) == pytest.approx(1.5)
    assert m.c_verify(rounds[:2], 0.03) is None
    assert m.verify_cost_by_length(rounds, 0.03) == {2: pytest.approx(1.5)}


def test_the_gamma_that_ran_is_read_from_the_rounds() -> None:
    rounds = [rec(0, 0, 0), rec(4, 4, 4), rec(4, 4, 1), rec(2, 2, 0), rec(4, 0, 0, steps=1)]
    assert m.speculative_gammas(rounds) == [4, 4, 2]
    assert m.mean_gamma(rounds) == pytest.approx(10 / 3)
    # The p_min stop drafted nothing: it ran as a plain step.
    assert m.gamma_histogram(rounds) == {0: 2, 2: 1, 4: 2}
    assert list(m.gamma_histogram(rounds)) == [0, 2, 4]
    assert m.mean_gamma([rec(0, 0, 0)]) == 0.0


def test_one_verify_fit_weighted_and_never_falling() -> None:
    line = fit_verify_line([(1.0, 1.0, 1.0), (3.0, 1.4, 1.0), (5.0, 1.8, 1.0)])
    assert line is not None
    assert line.per_row == pytest.approx(0.2) and line.intercept == pytest.approx(0.8)
    # A heavier point pulls the line towards itself.
    heavy = fit_verify_line([(1.0, 1.0, 1.0), (3.0, 1.4, 1.0), (5.0, 2.6, 10.0)])
    assert heavy is not None and heavy.per_row > line.per_row
    # Noise that makes more rows look cheaper is clamped: a pass never gets faster.
    flat = fit_verify_line([(1.0, 1.0, 1.0), (5.0, 0.8, 1.0)])
    assert flat == VerifyLine(0.9, 0.0)
    assert fit_verify_line([(3.0, 1.2, 1.0), (3.0, 1.4, 1.0)]) is None
    assert fit_verify_line([]) is None


def test_fit_verify_is_anchored_by_the_plain_step() -> None:
    rounds = [rec(4, 4, 2, verify_s=1.4 * STEP), rec(4, 4, 4, verify_s=1.4 * STEP)]
    line = m.fit_verify(rounds, STEP)
    assert line is not None
    # Through (1 row, 1.0) and (5 rows, 1.4): 0.1 per row.
    assert line.per_row == pytest.approx(0.1) and line(4) == pytest.approx(1.4)


def test_the_ledger_prices_plain_steps_at_one_and_unknown_costs_as_unknown() -> None:
    rounds = [rec(0, 0, 0), rec(4, 4, 2), rec(4, 4, 4)]
    rows = ledger(rounds, 0.1, 1.0)
    assert [r.cost for r in rows] == [1.0, pytest.approx(1.4), pytest.approx(1.4)]
    assert [r.cumulative_tokens for r in rows] == [1, 4, 9]
    assert [r.rejected_at for r in rows] == [None, 3, None]
    assert rows[-1].cumulative_cost == pytest.approx(3.8)
    unknown = ledger(rounds, None, None)
    assert unknown[0].cost == 1.0 and unknown[1].cost is None
    assert unknown[-1].cumulative_cost is None


def test_a_rounds_model_verdict_counts_only_the_draft_models_tokens() -> None:
    """Suffix tokens come first: the model's are judged only past a fully kept suffix run."""

    def hybrid(n: int, suffix: int, kept: int) -> RoundRecord:
        return RoundRecord(0, "hybrid", n, n, kept, kept + 1, 0.0, STEP, n - suffix, 0.0, suffix)

    assert hybrid(8, 3, 5).model_verdict == (5, 2)
    assert hybrid(8, 3, 3).model_verdict == (5, 0)  # judged: the first model token was refused
    assert hybrid(8, 3, 2).model_verdict is None  # a suffix token was refused first
    assert hybrid(4, 4, 4).model_verdict is None  # the suffix index drafted it all
    assert hybrid(4, 0, 1).model_verdict == (4, 1)


def test_a_plain_step_yields_one_token_even_the_step_that_ends_the_reply() -> None:
    # Nine plain steps, then one that draws the end of the reply: the reply shows no token of
    # it, but the step yielded one, as every plain step does.
    plain = [*(rec(0, 0, 0) for _ in range(9)), rec(0, 0, 0, emitted=0)]
    stats = summarize(
        plain,
        prompt_tokens=3,
        generated_tokens=10,
        prompt_s=0.1,
        generation_s=0.2,
        ttft_s=0.1,
        plain_step_s=STEP,
    )
    assert stats.tokens_per_round == m.tokens_per_round(plain) == 1.0
    # A speculative reply alike: 2 kept + 1, then 1 kept + the end, which the reply hides.
    spec = [rec(4, 4, 2), rec(4, 4, 1, emitted=1)]
    assert m.tokens_per_round(spec) == pytest.approx((3 + 2) / 2)
    assert m.tokens_per_round([]) is None


def test_a_reply_of_no_rounds_reports_its_times_as_floats() -> None:
    # --max-tokens 1: the one token comes from the prompt's pass, and no round runs.
    stats = summarize(
        [],
        prompt_tokens=3,
        generated_tokens=1,
        prompt_s=0.1,
        generation_s=0.0,
        ttft_s=0.1,
        plain_step_s=None,
    )
    data = json.loads(json.dumps(stats.to_dict()))
    times = {name: value for name, value in data.items() if name.endswith("_s")}
    assert times["draft_s"] == 0.0
    assert all(isinstance(value, float) for value in times.values() if value is not None), times


def test_a_plain_reply_has_no_whole_reply_speedup_to_show() -> None:
    from app.metrics.insight import analyse

    plain = [rec(0, 0, 0, verify_s=STEP * 0.7) for _ in range(8)]  # a unit timed when busier
    assert analyse(plain, STEP).measured_overall is None
    spec = [*plain, rec(4, 4, 3, draft_s=STEP, verify_s=STEP * 1.2)]
    assert analyse(spec, STEP).measured_overall is not None

"""What a paused draft's probes cost: whether a new reply probes at once, and the reading a
probe did priced into the wait for the next one (app/engine/auto_off.py)."""

from __future__ import annotations

from dataclasses import replace

from app.engine.adaptive import GammaController
from app.metrics.rounds import RoundRecord
from tests.unit.engine.test_adaptive import PLAIN_S, Pair, constant, drive


def _paused_useless() -> GammaController:
    controller = GammaController()
    drive(controller, Pair(constant(0.0), seed=1), 40)
    assert controller.speculation_off
    return controller


def _paused_after_paying() -> GammaController:
    """A draft that paid well for 150 rounds, then stopped being right."""

    def acceptance(round_index: int, _position: int) -> float:
        return 0.9 if round_index < 150 else 0.0

    controller = GammaController()
    pair = Pair(acceptance, seed=4)
    while not controller.speculation_off:
        assert pair.round_index < 200
        controller.observe(pair.run(controller.next_gamma()))
    return controller


def _probe(controller: GammaController, reading_s: float) -> None:
    """Run the probe now due: a γ = 1 round whose token is refused, after `reading_s` of
    reading what the draft had not read."""
    gamma = controller.next_gamma()
    assert gamma > 0
    controller.observe(
        RoundRecord(
            0,
            "draft",
            gamma,
            gamma,
            0,
            1,
            0.1 * PLAIN_S,
            1.1 * PLAIN_S,
            gamma,
            draft_catchup_s=reading_s,
        )
    )
    assert controller.speculation_off


def _until_probe(controller: GammaController) -> None:
    plain = RoundRecord(0, "plain", 0, 0, 0, 1, 0.0, PLAIN_S, 0)
    while controller.next_gamma() == 0:
        controller.observe(plain)


def test_a_draft_that_never_paid_keeps_its_schedule_on_a_new_reply() -> None:
    """A paused draft model that never paid would be probed, and would read the new prompt,
    once per reply: short replies would pay for probes far beyond its budget."""
    controller = _paused_useless()
    _until_probe(controller)
    _probe(controller, 0.0)
    controller.begin_reply()
    assert controller.next_gamma() == 0


def test_a_draft_that_lately_paid_well_is_probed_at_once_on_a_new_reply() -> None:
    controller = _paused_after_paying()
    _until_probe(controller)
    _probe(controller, 0.0)
    assert controller.next_gamma() == 0
    controller.begin_reply()
    assert controller.next_gamma() > 0


def test_a_paused_hybrid_is_probed_at_once_on_a_new_reply() -> None:
    """A hybrid's suffix tokens cost no pass, and its probes are how it resumes."""
    controller = GammaController()
    controller.observe(RoundRecord(0, "plain", 0, 0, 0, 1, 0.0, PLAIN_S, 0))
    pair = Pair(constant(0.0), seed=2)
    for _ in range(40):
        controller.observe(replace(pair.run(controller.next_gamma()), mode="hybrid"))
        if controller.speculation_off:
            break
    while controller.next_gamma() == 0 and not controller.speculation_off:
        controller.observe(RoundRecord(0, "plain", 0, 0, 0, 1, 0.0, PLAIN_S, 0))
    assert controller.speculation_off
    controller.begin_reply()
    assert controller.next_gamma() > 0


def test_a_probes_reading_lengthens_the_wait_for_the_next_one() -> None:
    """Probing may cost a set share of plain time: a probe that had to read 1.5 plain steps'
    worth of text before drafting costs that much more, so the next comes later."""
    waits = []
    for reading_s in (0.0, 1.5 * PLAIN_S):
        controller = _paused_after_paying()
        _until_probe(controller)
        _probe(controller, reading_s)
        waits.append(controller.probe_interval)
    assert waits[1] > waits[0]


def _kept_one(controller: GammaController) -> None:
    """Run the probe now due: a γ = 2 round whose first token is kept, the second refused."""
    assert controller.next_gamma() > 0
    controller.observe(RoundRecord(0, "draft", 2, 2, 1, 2, 0.2 * PLAIN_S, 1.2 * PLAIN_S, 2))
    assert controller.speculation_off


def test_a_draft_that_never_paid_waits_longer_after_each_probe_that_kept_nothing() -> None:
    """A probe costs a draft that never paid more than its budget of plain time allows at the
    shortest gap: each probe in a row that kept none of its tokens doubles the gap, up to 512
    rounds, and a probe that kept one brings back the short gap (bad luck, not a useless draft).
    The probes read what the draft had not read (32 tokens, 1.5 plain steps), so the budget
    alone would wait 300 rounds or more."""
    controller = _paused_useless()
    waits = []
    for _ in range(5):
        _until_probe(controller)
        _probe(controller, 1.5 * PLAIN_S)
        waits.append(controller.probe_interval)
    assert 128 <= waits[0] < waits[1]
    assert all(256 < wait <= 512 for wait in waits[2:])
    _until_probe(controller)
    _kept_one(controller)
    assert controller.probe_interval <= 64


def test_probing_a_draft_that_never_paid_costs_at_most_two_percent_of_plain_time() -> None:
    """A probe that keeps some of its tokens waits the short gap again, but one that first
    read 32 tokens of a new prompt (6 plain steps on a 2-core CPU) would, probed every 64
    rounds, cost a tenth of plain time: the gap grows until probing costs at most 2 %."""
    controller = _paused_useless()
    # One probe that kept nothing first: alone, a token kept at this cheap draft's γ 1 would
    # predict a win and resume.
    _until_probe(controller)
    _probe(controller, 0.0)
    _until_probe(controller)
    assert controller.next_gamma() > 0
    reading = 6.0 * PLAIN_S
    controller.observe(
        RoundRecord(
            0, "draft", 2, 2, 1, 2, 0.2 * PLAIN_S, 1.2 * PLAIN_S, 2, draft_catchup_s=reading
        )
    )
    assert controller.speculation_off
    # 6 plain steps at 2 % is 300 rounds, less the little the probe's own tokens paid back.
    assert controller.probe_interval >= 250


def _kept_whole(controller: GammaController, gamma: int) -> None:
    """Run the probe now due as a γ round whose draft is kept whole."""
    controller.observe(
        RoundRecord(
            0, "draft", gamma, gamma, gamma, gamma + 1, 0.1 * PLAIN_S * gamma, 1.2 * PLAIN_S, gamma
        )
    )


def test_a_probe_kept_whole_is_followed_at_once_by_another_as_long() -> None:
    """Evidence the resume rule cannot yet trust alone (after a probe that kept nothing): the
    next round probes again, while the draft has just read the context."""
    controller = _paused_useless()
    _until_probe(controller)
    _probe(controller, 0.0)
    _until_probe(controller)
    gamma = controller.next_gamma()
    assert gamma >= 2
    _kept_whole(controller, gamma)
    assert controller.speculation_off
    assert controller.next_gamma() >= gamma


def test_one_token_kept_of_one_waits_the_schedule() -> None:
    """Too common a luck to probe again at once (a draft right 15 % of the time)."""
    controller = _paused_useless()
    _until_probe(controller)
    _probe(controller, 0.0)
    _until_probe(controller)
    assert controller.next_gamma() > 0
    _kept_whole(controller, 1)
    assert controller.speculation_off
    assert controller.next_gamma() == 0


def test_a_resumed_draft_reads_a_prompt_the_rate_before_its_pause_would_leave_unread() -> None:
    """The rounds that paused the draft delivered less than plain: priced at their rate, no
    reading pays. Once probes resume the draft, that rate no longer holds."""
    controller = _paused_after_paying()
    controller.note_read(32, 0.1)
    assert not controller.reading_pays(32, 64)
    while controller.speculation_off:
        _until_probe(controller)
        _kept_whole(controller, max(controller.next_gamma(), 2))
    assert controller.reading_pays(32, 64)

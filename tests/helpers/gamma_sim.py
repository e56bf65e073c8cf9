"""A simulated target/draft pair driving the real GammaController the way the engine does.

Modelled: per-position acceptance that may change with the round, draft and verify seconds in
plain steps with jitter, verify cost by rows checked, the draft's catch-up after plain steps
(a batched read timed apart, never in draft_s, as the engine does), drafts cut short (a p_min
stop), replies that end early (end of sequence) or at their token budget, a new reply calling
`begin_reply`, and a manual γ set from a given round. Rates are tokens per simulated second.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from app.engine.adaptive import GammaController
from app.metrics.cost_model import expected_tokens_by_position
from app.metrics.rounds import RoundRecord

PLAIN_S = 0.02

Acceptance = Callable[[int, int], float]  # (round index, 1-based position) -> conditional α


def constant(alpha: float) -> Acceptance:
    return lambda _round, _position: alpha


def concave_verify(gamma: int) -> float:
    """Verify cost in plain steps for γ draft tokens, shaped like the demo pair on a CPU."""
    curve = {1: 1.22, 2: 1.30, 3: 1.36, 4: 1.40, 5: 1.45}
    return curve.get(gamma, 1.45 + 0.04 * (gamma - 5))


@dataclass
class SimPair:
    acceptance: Acceptance
    c_draft: float = 0.1
    # What a round's drafting costs once, whatever its length, in plain steps: the first pass
    # reads two tokens, and each round has its own bookkeeping.
    c_draft_round: float = 0.0
    c_verify: Callable[[int], float] = concave_verify
    # Catch-up: one batched draft read of n tokens costs this much per token, in plain steps.
    c_catchup: float = 0.03
    jitter: float = 0.05
    # Chance, per draft position, that the draft stops before proposing it (a p_min stop).
    stop_chance: float = 0.0
    # Chance that any emitted token ends the reply (end of sequence).
    eos_chance: float = 0.0
    seed: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def noise(self) -> float:
        return 1.0 + self.rng.uniform(-self.jitter, self.jitter)

    def true_speedup(self, round_index: int, gamma: int) -> float:
        """Expected tokens per plain step's time at this γ, from the true parameters."""
        if gamma == 0:
            return 1.0
        alphas = [self.acceptance(round_index, i) for i in range(1, gamma + 1)]
        cost = self.c_draft_round + gamma * self.c_draft + self.c_verify(gamma)
        return expected_tokens_by_position(alphas) / cost


@dataclass(frozen=True)
class SimRound:
    record: RoundRecord
    off: bool  # the controller's state after observing the round
    at_loss: bool  # speculated at a γ whose true speedup is below plain
    seconds: float  # everything the round cost, catch-up included
    reply: int


@dataclass
class Trace:
    rounds: list[SimRound] = field(default_factory=list)
    notices: list[tuple[int, str]] = field(default_factory=list)

    @property
    def gammas(self) -> list[int]:
        return [r.record.drafted for r in self.rounds]

    def flips(self) -> int:
        """Pause→resume and resume→pause switches."""
        return sum(a.off != b.off for a, b in zip(self.rounds, self.rounds[1:], strict=False))

    def tokens_per_second(self) -> float:
        return sum(r.record.emitted for r in self.rounds) / sum(r.seconds for r in self.rounds)


def simulate(
    pair: SimPair,
    choose: GammaController | int,
    *,
    rounds: int | None = None,
    replies: int = 1,
    max_tokens: int = 10**9,
    manual: tuple[int, int] | None = None,
) -> Trace:
    """Run `replies` replies (or stop after `rounds` rounds in all).

    choose: the controller under test, or a fixed γ (which, like the engine, runs one plain
    step first to measure the unit). manual: (round, γ) from which a fixed γ overrides auto.
    """
    trace = Trace()
    controller = choose if isinstance(choose, GammaController) else None
    measured_plain = False
    index = 0
    for reply in range(replies):
        if controller is not None:
            controller.begin_reply()
        produced = 0
        behind = 0  # tokens the draft has not read
        while produced < max_tokens and (rounds is None or index < rounds):
            if manual is not None and index >= manual[0] and measured_plain:
                gamma = manual[1]
            elif controller is not None:
                gamma = controller.next_gamma()
            else:
                gamma = int(choose) if measured_plain else 0
            gamma = max(0, min(gamma, max_tokens - produced - 1))
            record, catchup_s, ended = _round(pair, index, gamma, behind, max_tokens - produced)
            measured_plain = measured_plain or gamma == 0
            behind = behind + record.emitted if record.draft_steps == 0 else 0
            produced += record.emitted
            if controller is not None:
                controller.observe(record)
                while (message := controller.take_notice()) is not None:
                    trace.notices.append((index, message))
            off = controller.speculation_off if controller is not None else False
            at_loss = record.drafted > 0 and pair.true_speedup(index, record.gamma) < 1.0
            seconds = record.draft_s + record.verify_s + catchup_s
            trace.rounds.append(SimRound(record, off, at_loss, seconds, reply))
            index += 1
            if ended:
                break
        if rounds is not None and index >= rounds:
            break
    return trace


def _round(
    pair: SimPair, index: int, gamma: int, behind: int, remaining: int
) -> tuple[RoundRecord, float, bool]:
    rng = pair.rng
    if gamma == 0:
        ended = rng.random() < pair.eos_chance
        verify_s = PLAIN_S * pair.noise()
        return RoundRecord(index, "plain", 0, 0, 0, 0 if ended else 1, 0.0, verify_s, 0), 0.0, ended
    catchup_s = behind * pair.c_catchup * PLAIN_S * pair.noise() if behind else 0.0
    drafted = 0
    while drafted < gamma and rng.random() >= pair.stop_chance:
        drafted += 1
    steps = min(drafted + 1, gamma)  # the pass that stopped the draft was paid for
    draft_s = (pair.c_draft_round + steps * pair.c_draft) * PLAIN_S * pair.noise()
    if drafted == 0:
        verify_s = PLAIN_S * pair.noise()
        record = RoundRecord(index, "plain", gamma, 0, 0, 1, draft_s, verify_s, steps)
        return record, catchup_s, False
    accepted = 0
    while accepted < drafted and rng.random() < pair.acceptance(index, accepted + 1):
        accepted += 1
    verify_s = pair.c_verify(drafted) * PLAIN_S * pair.noise()
    emitted = 0
    ended = False
    for _ in range(min(accepted + 1, remaining)):
        if rng.random() < pair.eos_chance:
            ended = True
            break
        emitted += 1
    record = RoundRecord(
        index, "draft", gamma, drafted, accepted, emitted, draft_s, verify_s, steps
    )
    return record, catchup_s, ended

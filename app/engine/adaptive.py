"""Adaptive draft length with auto-off, fed only by the timings of rounds already run.

The controller applies the cost model (app/metrics) to live measurements: per-position conditional
acceptance (so a draft that slips more at later positions is priced as it is), seconds per draft
token, and verify seconds by the number of rows checked. Each round it picks the γ with the most
expected tokens per second and compares that with plain decoding's one token per plain step.
When speculation loses on both the prediction and the measurement for several rounds in a row,
it times a fresh plain step (the machine may simply have got busier since plain was last
measured), and only if speculation still loses by a clear margin does it switch itself off, run
plain steps, and probe now and then to see if it pays again.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from app.metrics.cost_model import MAX_GAMMA, expected_tokens_by_position, fit_verify_line
from app.metrics.measured import judged_positions
from app.metrics.rounds import RoundRecord

# Guards divisions by measured times that a coarse clock may report as zero.
_MIN_SECONDS = 1e-9
# Pseudo-observations pulling a sparsely measured position towards the pooled acceptance, so one
# unlucky round at a deep position does not decide γ.
_SHRINK = 8.0
# How far (in standard errors) recent acceptance must stray from the long-run figure before the
# long-run figure is judged to describe text or a draft that no longer applies.
_CHANGE_Z = 4.0
# Draft one position past the best γ this often, so deeper positions keep being measured and γ
# can grow when acceptance does.
_EXPLORE_EVERY = 6
# Probes stay short because while off every drafted token is presumed wasted.
_PROBE_GAMMA = 2
# Speculation must lose by more than this share of plain speed before it is paused: a timer's
# jitter or a neighbour process must not switch off a draft that pays.
_LOSS_MARGIN = 0.05
# A loss this large (measured below 0.75× plain) is no timing noise: two rounds of it suffice.
# Smaller losses must persist for a whole window of rounds.
_CLEAR_LOSS = 0.25
# The first rounds run at the initial γ while the draft keeps at least half of its tokens, so
# that γ is first chosen from a few rounds of acceptance, not from one round and a prior.
_WARMUP_ROUNDS = 3
# After each probe that loses, the next comes this many times later, up to _MAX_BACKOFF times
# the base interval: a draft that keeps losing costs less and less, and one that improves is
# still noticed within a few hundred tokens.
_BACKOFF = 2
_MAX_BACKOFF = 4


@dataclass
class _Acceptance:
    """Exponentially forgotten counts of conditional trials per draft position.

    Position i is a trial only when positions 1..i−1 were accepted: after the first rejection the
    target never judged the rest, so counting them would bias later positions downwards.
    """

    decay: float
    tried: list[float] = field(default_factory=list)
    kept: list[float] = field(default_factory=list)

    def add(self, drafted: int, accepted: int) -> None:
        self.tried = [t * self.decay for t in self.tried]
        self.kept = [k * self.decay for k in self.kept]
        judged = judged_positions(drafted, accepted)
        while len(self.tried) < judged:
            self.tried.append(0.0)
            self.kept.append(0.0)
        for i in range(judged):
            self.tried[i] += 1.0
            if i < accepted:
                self.kept[i] += 1.0

    def pooled(self) -> tuple[float, float]:
        """Laplace-smoothed pooled acceptance and its trial count."""
        n = math.fsum(self.tried)
        return (math.fsum(self.kept) + 1.0) / (n + 2.0), n

    def conditional(self, positions: int) -> list[float]:
        prior, _ = self.pooled()
        out: list[float] = []
        for i in range(positions):
            n = self.tried[i] if i < len(self.tried) else 0.0
            k = self.kept[i] if i < len(self.kept) else 0.0
            out.append((k + _SHRINK * prior) / (n + _SHRINK))
        return out

    def copy_from(self, other: _Acceptance) -> None:
        self.tried = list(other.tried)
        self.kept = list(other.kept)

    def clear(self) -> None:
        self.tried.clear()
        self.kept.clear()


@dataclass
class _Running:
    """A mean that averages its first `horizon` samples evenly, then forgets exponentially."""

    horizon: int
    value: float = 0.0
    count: int = 0

    def add(self, x: float) -> None:
        self.count += 1
        self.value += (x - self.value) / min(self.count, self.horizon)


@dataclass
class _VerifyCost:
    """Verify seconds by the number of rows checked, from the passes measured at each count.

    On a CPU the cost is concave in the rows (two rows cost 1.2 plain steps, six only 1.45 on
    the demo pair), so a straight line through all counts misprices short drafts. Each count
    keeps its own running mean; counts in between are interpolated, counts beyond the largest
    measured one are extrapolated along a weighted least-squares line. A plain step is a
    one-row pass, so it anchors the curve even when speculation has run at one γ only. Weights
    fade so that counts not seen lately (an older context length) count less.
    """

    horizon: int
    fade: float
    means: dict[int, _Running] = field(default_factory=dict)
    weights: dict[int, float] = field(default_factory=dict)

    def add(self, rows: int, seconds: float) -> None:
        for r in self.weights:
            self.weights[r] *= self.fade
        self.means.setdefault(rows, _Running(self.horizon)).add(seconds)
        self.weights[rows] = min(self.weights.get(rows, 0.0) + 1.0, float(self.horizon))

    def mean_at(self, rows: int) -> float | None:
        m = self.means.get(rows)
        return m.value if m is not None else None

    def predict(self, rows: int) -> float:
        points = sorted((r, self.means[r].value, w) for r, w in self.weights.items() if w > 0.0)
        counts = [r for r, _, _ in points]
        costs = _non_decreasing([y for _, y, _ in points], [w for _, _, w in points])
        if rows <= counts[0]:
            return max(costs[0], _MIN_SECONDS)
        for i in range(1, len(counts)):
            if rows <= counts[i]:
                share = (rows - counts[i - 1]) / (counts[i] - counts[i - 1])
                return max(costs[i - 1] + share * (costs[i] - costs[i - 1]), _MIN_SECONDS)
        line = fit_verify_line((float(r), y, w) for r, y, w in points)
        slope = line.per_row if line is not None else 0.0
        return max(costs[-1] + slope * (rows - counts[-1]), _MIN_SECONDS)


def _non_decreasing(values: list[float], weights: list[float]) -> list[float]:
    """The weighted least-squares non-decreasing fit (pool adjacent violators).

    Noise can make a longer pass look cheaper than a shorter one; believing it would send γ
    up for no reason.
    """
    blocks: list[tuple[float, float, int]] = []  # (mean, weight, values pooled)
    for value, weight in zip(values, weights, strict=True):
        mean, total, size = value, weight, 1
        while blocks and blocks[-1][0] > mean:
            prev_mean, prev_total, prev_size = blocks.pop()
            mean = (prev_mean * prev_total + mean * total) / (prev_total + total)
            total += prev_total
            size += prev_size
        blocks.append((mean, total, size))
    return [mean for mean, _, size in blocks for _ in range(size)]


class GammaController:
    """Chooses each round's draft length; 0 means run a plain target step instead."""

    def __init__(
        self,
        *,
        max_gamma: int = MAX_GAMMA,
        initial_gamma: int = 4,
        window: int = 16,
        probe_every: int = 24,
    ) -> None:
        if max_gamma < 1:
            raise ValueError(f"max_gamma must be >= 1, got {max_gamma}")
        if not 1 <= initial_gamma <= max_gamma:
            raise ValueError(f"initial_gamma must lie in 1..{max_gamma}, got {initial_gamma}")
        if window < 2:
            raise ValueError(f"window must be >= 2, got {window}")
        if probe_every < 2:
            raise ValueError(f"probe_every must be >= 2, got {probe_every}")
        self._max_gamma = max_gamma
        self._initial_gamma = initial_gamma
        self._window = window
        self._probe_every = probe_every
        # Switching off on a single bad round would let noise decide.
        self._patience = 2
        # Plain time drifts as the context grows, so it is re-measured now and then while on.
        self._remeasure_every = 4 * probe_every
        # Two horizons: the short one notices a change, the long one keeps γ steady when the
        # curve near its peak is flat and the per-round acceptance noise is not.
        self._short = _Acceptance(decay=1.0 - 1.0 / window)
        self._long = _Acceptance(decay=1.0 - 1.0 / (8 * window))
        self._verify = _VerifyCost(horizon=window, fade=1.0 - 1.0 / (8 * window))
        self._draft_per_token = _Running(window)
        self._recent: deque[tuple[int, float]] = deque(maxlen=window)
        self._off = False
        self._losing_streak = 0
        # Set when a losing streak asks for a fresh plain step before pausing.
        self._confirming = False
        self._spec_rounds = 0
        self._warming_up = True
        self._probe_interval = probe_every
        self._since_plain = 0
        self._plain_since_probe = 0
        self._notices: deque[str] = deque()

    @property
    def speculation_off(self) -> bool:
        return self._off

    @property
    def plain_step_s(self) -> float | None:
        return self._verify.mean_at(1)

    def take_notice(self) -> str | None:
        return self._notices.popleft() if self._notices else None

    def next_gamma(self) -> int:
        if self.plain_step_s is None:
            return 0
        if self._off:
            if self._plain_since_probe >= self._probe_interval - 1:
                return min(_PROBE_GAMMA, self._max_gamma)
            return 0
        if self._warming_up:
            return self._initial_gamma
        if self._confirming or self._since_plain >= self._remeasure_every:
            return 0
        gamma, _ = self._best(self._long)
        if self._spec_rounds % _EXPLORE_EVERY == _EXPLORE_EVERY - 1:
            return min(gamma + 1, self._max_gamma)
        return gamma

    def observe(self, record: RoundRecord) -> None:
        if record.drafted == 0:
            self._observe_plain(record.verify_s)
            if record.draft_steps and not self._off:
                # The draft ran and then proposed nothing (the p_min stop): its passes were
                # wasted, which the measured rate must show.
                self._recent.append((record.emitted, record.draft_s + record.verify_s))
            return
        self._spec_rounds += 1
        self._since_plain += 1
        if 2 * record.accepted < record.drafted or self._spec_rounds >= _WARMUP_ROUNDS:
            self._warming_up = False
        self._draft_per_token.add(max(record.draft_s, 0.0) / record.drafted)
        self._verify.add(record.drafted + 1, max(record.verify_s, _MIN_SECONDS))
        if self._off:
            self._observe_probe(record)
            return
        self._add_acceptance(record.drafted, record.accepted)
        self._recent.append((record.emitted, record.draft_s + record.verify_s))
        self._check_losing()

    def predicted_rate(self, gamma: int) -> float | None:
        """Expected tokens per second at this γ from the long-run figures, None before data."""
        if self.plain_step_s is None or self._draft_per_token.count == 0:
            return None
        return self._rate(self._long, gamma)

    def _observe_plain(self, seconds: float) -> None:
        self._verify.add(1, max(seconds, _MIN_SECONDS))
        self._since_plain = 0
        if self._off:
            self._plain_since_probe += 1
        if self._confirming:
            self._confirming = False
            self._confirm_losing(1.0 / max(seconds, _MIN_SECONDS))

    def _observe_probe(self, record: RoundRecord) -> None:
        self._plain_since_probe = 0
        self._add_acceptance(record.drafted, record.accepted)
        plain_rate = self._plain_rate()
        probe_rate = record.emitted / max(record.draft_s + record.verify_s, _MIN_SECONDS)
        # A probe must keep every token it drafted: one lucky token out of two is what a draft
        # right a third of the time shows every few probes, and resuming on that would switch
        # a useless draft on and off all reply long.
        if record.accepted < record.drafted or probe_rate <= plain_rate:
            self._probe_interval = min(
                self._probe_interval * _BACKOFF, self._probe_every * _MAX_BACKOFF
            )
            return
        # A winning probe means the draft or the text changed since speculation was paused, so
        # the acceptance history describes a regime that no longer holds.
        self._short.clear()
        self._long.clear()
        self._add_acceptance(record.drafted, record.accepted)
        self._recent.clear()
        self._recent.append((record.emitted, record.draft_s + record.verify_s))
        self._losing_streak = 0
        self._off = False
        self._probe_interval = self._probe_every
        self._notices.append(
            f"speculation resumed: a probe at γ={record.drafted} ran at "
            f"{probe_rate / plain_rate:.2f}× plain decoding"
        )

    def _add_acceptance(self, drafted: int, accepted: int) -> None:
        self._short.add(drafted, accepted)
        self._long.add(drafted, accepted)
        short_p, short_n = self._short.pooled()
        long_p, _ = self._long.pooled()
        if short_n < self._window:
            return
        stderr = math.sqrt(long_p * (1.0 - long_p) / short_n)
        if abs(short_p - long_p) > _CHANGE_Z * stderr:
            self._long.copy_from(self._short)

    def _check_losing(self) -> None:
        plain_rate = self._plain_rate()
        verdict = self._losing(plain_rate)
        if verdict is None:
            self._losing_streak = 0
            return
        self._losing_streak += 1
        _, measured = verdict
        clear = measured < plain_rate * (1.0 - _CLEAR_LOSS)
        if self._losing_streak >= (self._patience if clear else self._window):
            self._losing_streak = 0
            self._confirming = True

    def _losing(self, plain_rate: float) -> tuple[float, float] | None:
        """(predicted, measured) speculative rates when both lose to plain, else None."""
        _, predicted = self._best(self._short)
        emitted = sum(e for e, _ in self._recent)
        seconds = math.fsum(s for _, s in self._recent)
        measured = emitted / max(seconds, _MIN_SECONDS)
        if predicted < plain_rate and measured < plain_rate * (1.0 - _LOSS_MARGIN):
            return predicted, measured
        return None

    def _confirm_losing(self, fresh_plain_rate: float) -> None:
        # Judged against the plain step just timed, not the running mean: if the machine got
        # slower, speculation's recent rounds slowed too, and pausing would compare today's
        # speculation with yesterday's plain speed.
        verdict = self._losing(fresh_plain_rate)
        if verdict is None:
            return
        predicted, measured = verdict
        self._off = True
        self._plain_since_probe = 0
        self._notices.append(
            f"speculation paused: predicted {predicted / fresh_plain_rate:.2f}× and measured "
            f"{measured / fresh_plain_rate:.2f}× plain decoding over the last "
            f"{len(self._recent)} rounds; re-checking after {self._probe_interval} rounds"
        )

    def _plain_rate(self) -> float:
        plain = self.plain_step_s
        if plain is None:
            # Engines are told to run a plain step first; without one the comparison is moot.
            return 0.0
        return 1.0 / max(plain, _MIN_SECONDS)

    def _rate(self, acceptance: _Acceptance, gamma: int) -> float:
        tokens = expected_tokens_by_position(acceptance.conditional(gamma))
        seconds = gamma * self._draft_per_token.value + self._verify.predict(gamma + 1)
        return tokens / max(seconds, _MIN_SECONDS)

    def _best(self, acceptance: _Acceptance) -> tuple[int, float]:
        rates = [(self._rate(acceptance, g), g) for g in range(1, self._max_gamma + 1)]
        rate, gamma = max(rates, key=lambda pair: (pair[0], -pair[1]))
        return gamma, rate

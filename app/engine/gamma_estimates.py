"""γ auto's running estimates: conditional acceptance by draft position, a running mean, and
verify seconds by rows checked; and the budget that spaces a paused draft's probes. Kept apart
from the decision rules in app/engine/adaptive.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.engine.depth_cost import DepthSlope
from app.metrics.cost_model import fit_verify_line
from app.metrics.measured import judged_positions

# Guards divisions by measured times that a coarse clock may report as zero.
MIN_SECONDS = 1e-9
# A draft must lose by more than this share of the rate it is weighed against before it is set
# aside: a timer's jitter or a neighbour process must not switch off a draft that pays.
LOSS_MARGIN = 0.05
# Pseudo-observations pulling a sparsely measured position towards the pooled acceptance, so one
# unlucky round at a deep position does not decide γ.
_SHRINK = 8.0


@dataclass
class Acceptance:
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

    def first(self) -> tuple[float, float]:
        """Laplace-smoothed acceptance of the first position and its trial count."""
        n = self.tried[0] if self.tried else 0.0
        k = self.kept[0] if self.kept else 0.0
        return (k + 1.0) / (n + 2.0), n

    def cautious(self, positions: int, z: float) -> list[float]:
        """Each position's acceptance under a Jeffreys prior lowered by z standard deviations
        of its Beta posterior: no pull towards other positions, so a few trials count for
        little. (A uniform prior on top of the deduction caps eight kept tokens out of eight at
        0.81, which a draft costing half a plain step per pass can never resume from.)"""
        return [max(mean - z * sd, 0.0) for mean, sd in self._posteriors(positions)]

    def optimistic(self, positions: int, z: float) -> list[float]:
        """Each position's acceptance raised by z standard deviations, as `cautious` lowers it:
        what the draft may still turn out to be worth, on evidence as thin as a probe's."""
        return [min(mean + z * sd, 1.0) for mean, sd in self._posteriors(positions)]

    def _posteriors(self, positions: int) -> list[tuple[float, float]]:
        """Each position's Jeffreys posterior mean and an approximate standard deviation."""
        out: list[tuple[float, float]] = []
        for i in range(positions):
            n = self.tried[i] if i < len(self.tried) else 0.0
            k = self.kept[i] if i < len(self.kept) else 0.0
            mean = (k + 0.5) / (n + 1.0)
            out.append((mean, math.sqrt(mean * (1.0 - mean) / (n + 2.0))))
        return out

    def copy_from(self, other: Acceptance) -> None:
        self.tried = list(other.tried)
        self.kept = list(other.kept)

    def clear(self) -> None:
        self.tried.clear()
        self.kept.clear()


@dataclass
class TextDifficulty:
    """How much more often than the long-run figures predict the draft misses on the text at
    hand, as a factor on every position's miss rate.

    The long-run figures pool earlier replies, so they give acceptance's shape by position but
    not the level of a new prompt: the draft may miss once in 64 tokens of code and eight times
    in 64 tokens of Polish. Each round of the reply is a set of trials whose expected misses
    the long-run figures give; the factor is observed over expected misses under a Gamma prior
    of mean one (`prior` expected misses of pseudo-evidence), so a reply starts at the long-run
    level and a few rounds move it. Misses come in bursts, so the evidence fades per round.
    """

    prior: float
    fade: float
    misses: float = 0.0
    expected: float = 0.0

    def add(self, missed: bool, expected_misses: float) -> None:
        self.misses = self.misses * self.fade + (1.0 if missed else 0.0)
        self.expected = self.expected * self.fade + expected_misses

    @property
    def factor(self) -> float:
        return (self.prior + self.misses) / (self.prior + self.expected)

    def scale(self, acceptance: list[float]) -> list[float]:
        factor = self.factor
        return [max(1.0 - (1.0 - a) * factor, 0.0) for a in acceptance]

    def clear(self) -> None:
        self.misses = 0.0
        self.expected = 0.0


@dataclass
class FadedRate:
    """Tokens per second over the rounds just run: faded sums of tokens and of seconds, so a
    round counts by its length in time, not once each."""

    fade: float
    tokens: float = 0.0
    seconds: float = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        self.tokens = self.tokens * self.fade + tokens
        self.seconds = self.seconds * self.fade + seconds

    @property
    def rate(self) -> float | None:
        return self.tokens / self.seconds if self.seconds > MIN_SECONDS else None

    def clear(self) -> None:
        self.tokens = self.seconds = 0.0


@dataclass
class RunningMean:
    """A mean that averages its first `horizon` samples evenly, then forgets exponentially."""

    horizon: int
    value: float = 0.0
    count: int = 0

    def add(self, x: float) -> None:
        self.count += 1
        self.value += (x - self.value) / min(self.count, self.horizon)


@dataclass
class SecondsByCount:
    """Seconds measured per count (draft passes in a round, rows in a verification): a running
    mean per count, and a weight per count that fades so counts not seen lately count less.

    Each count also keeps the mean context depth of its samples, and every mean is carried to
    the depth where prices are asked (`depth`: the latest pass's unless set) along the slope
    the passes have proven (app/engine/depth_cost.py)."""

    horizon: int
    fade: float
    means: dict[int, RunningMean] = field(default_factory=dict)
    weights: dict[int, float] = field(default_factory=dict)
    depth: int = 0
    _depths: dict[int, RunningMean] = field(default_factory=dict)
    _slope: DepthSlope = field(init=False)
    # A hybrid prices dozens of drafts between two passes, all at one depth: points() once
    # per depth, until the next sample.
    _points: tuple[int, tuple[tuple[int, float, float], ...]] | None = None

    def __post_init__(self) -> None:
        self._slope = DepthSlope(self.fade)

    def add(self, count: int, seconds: float, depth: int = 0) -> None:
        for n in self.weights:
            self.weights[n] *= self.fade
        self.means.setdefault(count, RunningMean(self.horizon)).add(seconds)
        self._depths.setdefault(count, RunningMean(self.horizon)).add(depth)
        self.weights[count] = min(self.weights.get(count, 0.0) + 1.0, float(self.horizon))
        self._slope.add(count, depth, max(seconds, MIN_SECONDS))
        self.depth = depth
        self._points = None

    def mean_at(self, count: int) -> float | None:
        """The mean seconds of `count`, carried to the current depth; None if never measured."""
        m = self.means.get(count)
        return m.value * self._depth_factor(count) if m is not None else None

    def points(self) -> tuple[tuple[int, float, float], ...]:
        """(count, mean seconds at the current depth, weight) of every count that still
        carries weight, by count."""
        if self._points is None or self._points[0] != self.depth:
            points = sorted(
                (n, self.means[n].value * self._depth_factor(n), w)
                for n, w in self.weights.items()
                if w > 0.0
            )
            self._points = (self.depth, tuple(points))
        return self._points[1]

    def _depth_factor(self, count: int) -> float:
        return self._slope.factor(self._depths[count].value, self.depth)


@dataclass
class DraftCost(SecondsByCount):
    """Draft seconds per round by the passes it ran: a part paid once per round plus a part
    per pass.

    The first pass of a round reads two tokens (the target's bonus or correction and the draft's
    own last proposal, which it never read) and each round has its own bookkeeping, so a pass
    costs less the more passes a round runs (0.52, 0.47 and 0.44 plain steps per pass at γ 3, 5
    and 7 on the demo pair). Pricing every pass at what it cost in the rounds just run would
    overcharge longer drafts and undercharge shorter ones, so γ would settle too short. Each
    pass count keeps its own running mean; a weighted least-squares line through them prices
    every count once two are measured (γ auto explores one past its choice, so they are).
    Before that, or when the line would charge a round less than nothing, cost is
    proportional to the passes.
    """

    @property
    def measured(self) -> bool:
        return bool(self.means)

    def predict_up_to(self, max_passes: int) -> list[float]:
        """Predicted seconds for rounds of 1..max_passes passes."""
        points = self.points()
        line = fit_verify_line(points)
        if line is not None and line.intercept >= 0.0:
            once, per_pass = line.intercept, line.per_row
        else:
            once = 0.0
            total = math.fsum(w * n * n for n, _, w in points)
            per_pass = math.fsum(w * n * y for n, y, w in points) / total if total > 0 else 0.0
        return [max(once + per_pass * n, MIN_SECONDS) for n in range(1, max_passes + 1)]


@dataclass
class VerifyCurve(SecondsByCount):
    """Verify seconds by the number of rows checked, from the passes measured at each count.

    On a CPU the cost is concave in the rows (two rows cost 1.2 plain steps, six only 1.45 on
    the demo pair), so a straight line through all counts misprices short drafts. Each count
    keeps its own running mean; counts in between are interpolated, counts beyond the largest
    measured one are extrapolated along a weighted least-squares line. A plain step is a
    one-row pass, so it anchors the curve even when speculation has run at one γ only. Weights
    fade so that counts not seen lately (an older context length) count less.
    """

    def predict(self, rows: int) -> float:
        return self.predict_up_to(rows)[rows - 1]

    def predict_up_to(self, max_rows: int) -> list[float]:
        """Predicted seconds for 1..max_rows rows, fitting the measured points once."""
        points = self.points()
        counts = [r for r, _, _ in points]
        costs = _non_decreasing([y for _, y, _ in points], [w for _, _, w in points])
        line = fit_verify_line(points) if max_rows > counts[-1] else None
        slope = line.per_row if line is not None else 0.0
        out: list[float] = []
        i = 1
        for rows in range(1, max_rows + 1):
            if rows <= counts[0]:
                cost = costs[0]
            elif rows > counts[-1]:
                cost = costs[-1] + slope * (rows - counts[-1])
            else:
                while rows > counts[i]:
                    i += 1
                share = (rows - counts[i - 1]) / (counts[i] - counts[i - 1])
                cost = costs[i - 1] + share * (costs[i] - costs[i - 1])
            out.append(max(cost, MIN_SECONDS))
        return out


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


def strays(observed: float, trials: float, expected: float, *, min_trials: float, z: float) -> bool:
    """Whether a rate `observed` over `trials` differs from `expected` by more than `z`
    binomial standard errors; never on fewer than `min_trials` trials."""
    if trials < min_trials:
        return False
    stderr = math.sqrt(expected * (1.0 - expected) / trials)
    return abs(observed - expected) > z * stderr


def fastest_length(
    tokens: Sequence[float], draft_s: Sequence[float], verify_s: Sequence[float]
) -> tuple[int, float]:
    """The γ ≥ 1 with the most expected tokens per second (the shorter on a tie) and that rate:
    tokens[γ] expected from a round of γ, draft_s[γ - 1] its draft seconds, verify_s[γ] the
    seconds to check γ + 1 rows."""
    best_gamma, best_rate = 1, -1.0
    for gamma in range(1, len(draft_s) + 1):
        rate = tokens[gamma] / max(draft_s[gamma - 1] + verify_s[gamma], MIN_SECONDS)
        if rate > best_rate:
            best_gamma, best_rate = gamma, rate
    return best_gamma, best_rate


# The share of plain decoding's time that probing may cost while paused, by what the draft was
# worth before it lost: a draft that paid well (its long-run prediction at least this many
# times plain) probably hit a passage it cannot predict and pays a lot when it comes back, so it
# is checked often; one that never paid is checked rarely.
_PAID_WELL = 1.2
_LEARNING_BUDGET_PAID = 0.04
_LEARNING_BUDGET_UNPAID = 0.005
# Bounds on the rounds between probes, whatever the budget says. Longer for a draft that did
# not pay (256) failed a start paused by bad luck: it came back too late in 3 seeds of 20.
MIN_PROBE_INTERVAL = 4
_MAX_PROBE_INTERVAL = 64
# A draft that never paid waits twice as long after each probe in a row that kept none of its
# tokens, this many times at most (to 512 rounds; its budget usually binds first). The pruned
# demo draft, probed every 64 rounds with a 32-token reading each time, ran at 0.97x plain
# where the budget meant 0.995x. A probe that kept anything waits the short gap again: doubling
# after every probe that did not resume had a simulated good draft, paused by an unlucky start,
# come back too late in one more seed of 20.
_BACK_OFF_DOUBLINGS = 3
# Whatever the bounds say, probing a draft that did not pay costs at most this share of plain
# time: the longest gap was set for probes of a few draft passes, and a probe that first reads
# what the draft lacks (up to 32 tokens of a new prompt, priced in `loss`) costs far more. On a
# 2-core AVX2 CPU the demo's Q4_1 draft, paused and probed once a 64-token reply, lost 0.24 s a
# probe (ten plain steps) on 1.3-1.9 s replies, and γ auto ran 0.91x plain.
_MOST_UNPAID_SHARE = 0.02


def paid_well(worth: float) -> bool:
    """Whether a draft lately worth this (× plain) paid well enough to be checked often."""
    return worth >= _PAID_WELL


def probe_interval(loss: float, worth: float, fruitless_probes: int = 0) -> int:
    """Rounds until a paused draft's next probe, so that probing costs at most its budget of
    plain time. `loss`: what a probe costs beyond the plain steps its tokens would have taken,
    in plain steps; `worth`: the best the draft was lately worth, × plain; `fruitless_probes`:
    the latest probes in a row that kept none of their draft tokens. A draft that did not pay
    is probed so that probing costs at most _MOST_UNPAID_SHARE of plain time, bounds aside."""
    if paid_well(worth):
        budget, longest = _LEARNING_BUDGET_PAID, _MAX_PROBE_INTERVAL
    else:
        longest = _MAX_PROBE_INTERVAL << min(fruitless_probes, _BACK_OFF_DOUBLINGS)
        budget = _LEARNING_BUDGET_UNPAID
    loss = max(loss, 0.0)
    interval = max(MIN_PROBE_INTERVAL, min(math.ceil(loss / budget), longest))
    if paid_well(worth):
        return interval
    return max(interval, math.ceil(loss / _MOST_UNPAID_SHARE))

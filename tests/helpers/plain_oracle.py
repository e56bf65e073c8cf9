"""Exact output distributions of plain sampling, and a goodness-of-fit test against them.

`reply_distribution` enumerates every reply of up to `length` tokens that plain sampling from a
logit function can produce, with its exact probability: the product of the per-step
probabilities from the app's own sampling transform (`app.engine.sampling.distribution`, checked
on its own in tests/unit/engine/test_sampling.py). A reply that hits an end-of-generation token ends
there; the engine leaves that token out of the reply, so replies are compared with it appended
(`with_stop`).

`window_distribution` projects replies onto a run of positions, and `chi_square` is Pearson's
test with cells of small expectation pooled (Cochran's rule), so its p-value follows the
chi-square law closely enough for the family-wise rates the harness states.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from app.engine.config import SamplingConfig
from app.engine.sampling import distribution, greedy_token
from tests.helpers.fake_llama import LogitFn

Reply = tuple[int, ...]
ENDED = -1  # a window position after the reply stopped


def reply_distribution(
    logits: LogitFn,
    prompt: Sequence[int],
    sampling: SamplingConfig,
    length: int,
    eog: frozenset[int] = frozenset(),
) -> dict[Reply, float]:
    """Every reply plain sampling can give, mapped to its exact probability."""
    out: dict[Reply, float] = {}

    def expand(reply: Reply, mass: float) -> None:
        if len(reply) == length or (reply and reply[-1] in eog):
            out[reply] = out.get(reply, 0.0) + mass
            return
        history = [*prompt, *reply]
        if sampling.greedy:
            expand((*reply, greedy_token(logits(history), history, sampling)), mass)
            return
        p = distribution(logits(history), history, sampling)
        for token in np.flatnonzero(p > 0.0):
            expand((*reply, int(token)), mass * float(p[token]))

    expand((), 1.0)
    return out


def window(reply: Reply, start: int, stop: int) -> Reply:
    padded = reply + (ENDED,) * max(0, stop - len(reply))
    return padded[start:stop]


def window_distribution(exact: Mapping[Reply, float], start: int, stop: int) -> dict[Reply, float]:
    out: dict[Reply, float] = {}
    for reply, mass in exact.items():
        key = window(reply, start, stop)
        out[key] = out.get(key, 0.0) + mass
    return out


def windows(length: int, width: int = 3) -> list[tuple[int, int]]:
    """Runs of `width` positions covering 0..length: from the start, then the last one."""
    spans = [(start, start + width) for start in range(0, length - width + 1, width)]
    if not spans or spans[-1][1] < length:
        spans.append((max(0, length - width), length))
    return spans


@dataclass(frozen=True, slots=True)
class Fit:
    statistic: float
    dof: int
    p_value: float
    cells: int
    impossible: int  # observations the exact distribution gives probability 0


def chi_square(
    observed: Counter[Reply], expected: Mapping[Reply, float], *, min_expected: float = 10.0
) -> Fit:
    """Pearson's test of observed counts against exact probabilities.

    Cells expecting fewer than min_expected observations are pooled into one; if the pool is
    still too small it joins the smallest kept cell. An observation of a probability-0 outcome
    rejects outright.
    """
    n = sum(observed.values())
    impossible = sum(count for key, count in observed.items() if expected.get(key, 0.0) <= 0.0)
    if impossible:
        return Fit(float("inf"), 0, 0.0, 0, impossible)
    keys = sorted(expected, key=lambda k: -expected[k])
    kept = [k for k in keys if n * expected[k] >= min_expected]
    pooled = [k for k in keys if n * expected[k] < min_expected]
    cells: list[list[Reply]] = [[k] for k in kept]
    if pooled:
        pooled_expected = n * sum(expected[k] for k in pooled)
        if pooled_expected >= min_expected or not cells:
            cells.append(pooled)
        else:
            cells[-1].extend(pooled)
    obs = np.array([sum(observed.get(k, 0) for k in cell) for cell in cells], dtype=np.float64)
    exp = np.array([n * sum(expected[k] for k in cell) for cell in cells], dtype=np.float64)
    dof = len(cells) - 1
    if dof == 0:
        return Fit(0.0, 0, 1.0, len(cells), 0)
    statistic = float(((obs - exp) ** 2 / exp).sum())
    return Fit(statistic, dof, float(stats.chi2.sf(statistic, dof)), len(cells), 0)


def counts(replies: Iterable[Reply], start: int, stop: int) -> Counter[Reply]:
    return Counter(window(reply, start, stop) for reply in replies)

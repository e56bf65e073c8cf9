"""The sampling transform, applied identically to target and draft logits.

Order follows llama-cpp-python's default chain: logit bias, repetition penalty, presence and
frequency penalties (llama.cpp's penalties sampler), top-k, top-p, min-p, then temperature over
the survivors. What matters for exact speculative sampling is only that the
target's p and the draft's q come out of the same deterministic function of their own logits
and the same token history; then accepting with min(1, p/q) reproduces plain sampling from p.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from app.engine.config import SamplingConfig

FloatArray = npt.NDArray[np.float64]

# Enough candidates for any realistic nucleus; only if they do not reach top_p is the whole
# vocabulary sorted (argsort of 150k floats costs milliseconds per row).
_NUCLEUS_SHORTLIST = 1024


def penalized_logits(
    logits: npt.NDArray[np.float32], history: Sequence[int], config: SamplingConfig
) -> npt.NDArray[np.float32]:
    """Add the logit bias, then apply the penalties over the last `repeat_last_n` tokens."""
    out = logits
    if config.logit_bias:
        ids = np.array([t for t, _ in config.logit_bias], dtype=np.int64)
        bias = np.array([b for _, b in config.logit_bias], dtype=np.float32)
        inside = ids < logits.shape[0]
        out = logits.copy()
        out[ids[inside]] += bias[inside]
    repeat = config.repeat_penalty != 1.0
    counted = config.presence_penalty != 0.0 or config.frequency_penalty != 0.0
    if not (repeat or counted) or config.repeat_last_n == 0 or not history:
        return out
    window = np.asarray(history[-config.repeat_last_n :], dtype=np.int64)
    recent, counts = np.unique(window, return_counts=True)
    inside = recent < logits.shape[0]
    recent, counts = recent[inside], counts[inside]
    out = out.copy() if out is logits else out
    if repeat:
        values = out[recent]
        # llama.cpp's rule: shrink positive logits, grow negative ones, so the token loses.
        out[recent] = np.where(
            values > 0, values / config.repeat_penalty, values * config.repeat_penalty
        )
    if counted:
        out[recent] -= counts * config.frequency_penalty + config.presence_penalty
    return out


def greedy_token(
    logits: npt.NDArray[np.float32], history: Sequence[int], config: SamplingConfig
) -> int:
    return int(np.argmax(penalized_logits(logits, history, config)))


def top_probability(logits: npt.NDArray[np.float32]) -> float:
    """Softmax probability of the most likely token (the draft's p_min confidence test)."""
    shifted = logits.astype(np.float64) - float(logits.max())
    return float(1.0 / np.exp(shifted).sum())


def confidence_margin(probs: FloatArray) -> float:
    """How much more likely the draft's favourite token is than its runner-up (γ auto's
    confidence stop reads it: near-ties are where a draft and its target part)."""
    if probs.shape[0] < 2:
        return 1.0
    second, first = np.partition(probs, -2)[-2:]
    return float(first - second)


def logit_margin(logits: npt.NDArray[np.float32]) -> float:
    """confidence_margin of the softmax of these logits, without forming the softmax (a third
    of the time on a 49k vocabulary: the greedy draft pays it every pass under γ auto)."""
    if logits.shape[0] < 2:
        return 1.0
    second, first = np.partition(logits, -2)[-2:]
    total = float(np.exp(logits - first).sum())
    return (1.0 - float(np.exp(second - first))) / total


def distribution(
    logits: npt.NDArray[np.float32], history: Sequence[int], config: SamplingConfig
) -> FloatArray:
    """The probability vector plain sampling draws from (temperature > 0)."""
    z = penalized_logits(logits, history, config).astype(np.float64)
    keep = np.ones(z.shape[0], dtype=bool)
    if 0 < config.top_k < z.shape[0]:
        cut = np.partition(z, -config.top_k)[-config.top_k]
        keep &= z >= cut
    if config.top_p < 1.0 or config.min_p > 0.0:
        base = np.where(keep, z, -np.inf)
        probs = np.exp(base - base.max())
        probs /= probs.sum()
        if config.top_p < 1.0:
            keep &= _nucleus_mask(probs, config.top_p)
        if config.min_p > 0.0:
            keep &= probs >= config.min_p * probs.max()
    scaled = np.where(keep, z / config.temperature, -np.inf)
    out: FloatArray = np.exp(scaled - scaled.max())
    out /= out.sum()
    return out


def _nucleus_mask(probs: FloatArray, top_p: float) -> npt.NDArray[np.bool_]:
    """Smallest set of most likely tokens whose mass reaches top_p (ties broken by id); never
    empty, so top_p = 0 keeps the most likely token alone."""
    n = probs.shape[0]
    short = min(_NUCLEUS_SHORTLIST, n)
    candidates = np.argpartition(-probs, short - 1)[:short] if short < n else np.arange(n)
    # Stable sort by (-prob, id) so the cut is deterministic for target and draft alike.
    order = candidates[np.lexsort((candidates, -probs[candidates]))]
    cumulative = np.cumsum(probs[order])
    if cumulative[-1] < top_p and short < n:
        order = np.lexsort((np.arange(n), -probs))
        cumulative = np.cumsum(probs[order])
    count = int(np.searchsorted(cumulative, top_p, side="left")) + 1
    mask = np.zeros(n, dtype=bool)
    mask[order[: min(count, order.shape[0])]] = True
    return mask


def sample(probs: FloatArray, rng: np.random.Generator) -> int:
    cumulative = np.cumsum(probs)
    u = rng.random() * cumulative[-1]
    index = int(np.searchsorted(cumulative, u, side="right"))
    return min(index, int(probs.shape[0]) - 1)

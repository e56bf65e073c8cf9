"""Closed forms of exact speculative sampling, as test oracles for app/engine/acceptance.py."""

from __future__ import annotations

import numpy as np

from app.engine.acceptance import acceptance_probability, residual
from app.engine.sampling import FloatArray


def engine_output_distribution(p: FloatArray, q: FloatArray) -> FloatArray:
    """What the engine's own rule emits when x ~ q, enumerated over x with its
    acceptance_probability and residual: Σ_x q(x) [a(x) δ_x + (1 - a(x)) residual(x)]."""
    out = np.zeros_like(p, dtype=np.float64)
    for x in np.flatnonzero(q > 0.0):
        kept = acceptance_probability(p, q, int(x))
        out[x] += q[x] * kept
        out += q[x] * (1.0 - kept) * residual(p, q, int(x))
    return out


def output_distribution(p: FloatArray, q: FloatArray) -> FloatArray:
    """What accept_or_correct emits when x ~ q, in closed form; equals p when the rule is exact."""
    kept = np.minimum(p, q)
    rejected_mass = 1.0 - kept.sum()
    r = np.maximum(p - q, 0.0)
    mass = r.sum()
    if mass <= 0.0:
        return kept
    out: FloatArray = kept + rejected_mass * r / mass
    return out


def natural_acceptance(p: FloatArray, q: FloatArray) -> float:
    """Σ min(p, q) = 1 - total variation distance: the chance one draft token is kept."""
    return float(np.minimum(p, q).sum())

"""Exact speculative sampling: accept a draft token with probability min(1, p(x)/q(x)), otherwise
draw from the normalised residual max(0, p - q). The token that comes out is distributed exactly
as p, whatever q is (Leviathan et al. 2023). A draft that proposes a
fixed token (greedy draft, prompt lookup) has a point-mass q, written here as q = None.
"""

from __future__ import annotations

import numpy as np

from app.engine.sampling import FloatArray, sample


def residual(p: FloatArray, q: FloatArray | None, x: int) -> FloatArray:
    """norm(max(0, p - q)); for a point mass q at x that is p with x removed."""
    if q is None:
        r = p.copy()
        r[x] = 0.0
    else:
        r = np.maximum(p - q, 0.0)
    mass = r.sum()
    if mass <= 0.0:
        # Only reachable through rounding when p == q, where rejection has probability ~0;
        # falling back to p keeps the output distribution p.
        return p
    normalised: FloatArray = r / mass
    return normalised


def acceptance_probability(p: FloatArray, q: FloatArray | None, x: int) -> float:
    qx = 1.0 if q is None else float(q[x])
    if qx <= 0.0:
        return 0.0  # the draft could not have proposed x; never happens for a real draw
    return min(1.0, float(p[x]) / qx)


def accept_or_correct(
    p: FloatArray, q: FloatArray | None, x: int, rng: np.random.Generator
) -> tuple[bool, int]:
    """Return (True, x) if x is kept, else (False, token drawn from the residual)."""
    if q is None:
        # A point-mass draft (the suffix index, prompt lookup, a greedy draft): draw from p
        # with the one draw plain sampling would make and keep x if it came out. That is the
        # rule above for q = None (x with p(x), else p without x), and it uses the random
        # stream exactly as plain decoding does, one draw per emitted token, so a seeded
        # reply is the plain one whatever was drafted (llama.cpp verifies this way): token
        # for token in exact mode, where p is computed as a plain step computes it.
        token = sample(p, rng)
        return token == x, token
    if rng.random() < acceptance_probability(p, q, x):
        return True, x
    return False, sample(residual(p, q, x), rng)

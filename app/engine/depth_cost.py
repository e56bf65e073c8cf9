"""How a pass's cost grows with the context it attends to, learned from the passes themselves.

Attention reads every cached token, so a pass costs more deep in a conversation than at its
start. Measured on the demo target (2 threads, no flash attention, an AMD EPYC), from depth 32
to 2048: one row 20.0 to 25.4 ms, eight rows 41 to 54 ms, 64 rows 150 to 275 ms. A cost
measured at one depth and charged at another misprices every choice it feeds: a 65-row pass
timed deep in a quoted passage priced 65 rows at 0.46 s where the next conversation's own took
0.13 s, and a plain step timed late in a long reply makes plain decoding look slower at the
start of the next one.

The model: each count's cost (rows verified, draft passes) at depth D is its mean times
1 + s·(D − d̄), d̄ the mean depth its samples were taken at and s one relative slope shared by
every count, fitted in log seconds against depth within each count (the pooled within-group
least-squares slope). The slope is used only as far as the samples prove it: its fitted value
less two standard errors, never below zero. A reply's own spread of depths (a hundred tokens)
proves nothing at a few per cent of timing noise, so a single short conversation prices as if
depth did not matter, as before; a long one, or several at different depths, learn the slope.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Standard errors the slope must clear: a noisy slope extrapolated over a thousand tokens of
# depth would misprice more than ignoring depth does.
_PROOF = 2.0
# However far a price is carried, it never falls below this share of what was measured.
_FLOOR = 0.5


@dataclass
class _Sums:
    """Faded sums of one count's samples: weight, depth, depth², log seconds, their products."""

    w: float = 0.0
    x: float = 0.0
    xx: float = 0.0
    y: float = 0.0
    yy: float = 0.0
    xy: float = 0.0

    def fade(self, keep: float) -> None:
        self.w *= keep
        self.x *= keep
        self.xx *= keep
        self.y *= keep
        self.yy *= keep
        self.xy *= keep

    def add(self, x: float, y: float) -> None:
        self.w += 1.0
        self.x += x
        self.xx += x * x
        self.y += y
        self.yy += y * y
        self.xy += x * y


@dataclass
class DepthSlope:
    """The relative growth of a pass's cost per token of depth, pooled over counts."""

    fade: float
    _sums: dict[int, _Sums] = field(default_factory=dict)
    _slope: float | None = None

    def add(self, count: int, depth: int, seconds: float) -> None:
        for sums in self._sums.values():
            sums.fade(self.fade)
        self._sums.setdefault(count, _Sums()).add(float(depth), math.log(seconds))
        self._slope = None

    @property
    def slope(self) -> float:
        """Relative cost growth per token of depth that the samples prove (0 when unproven)."""
        if self._slope is None:
            self._slope = self._fit()
        return self._slope

    def factor(self, from_depth: float, to_depth: float) -> float:
        """What a cost measured at mean depth `from_depth` is multiplied by at `to_depth`."""
        return max(1.0 + self.slope * (to_depth - from_depth), _FLOOR)

    def _fit(self) -> float:
        sxx = sxy = syy = weight = 0.0
        groups = 0
        for s in self._sums.values():
            if s.w <= 1.0:
                continue
            sxx += s.xx - s.x * s.x / s.w
            sxy += s.xy - s.x * s.y / s.w
            syy += s.yy - s.y * s.y / s.w
            weight += s.w
            groups += 1
        freedom = weight - groups - 1.0
        if sxx <= 0.0 or freedom < 1.0:
            return 0.0
        slope = sxy / sxx
        residual = max(syy - slope * sxy, 0.0) / freedom
        return max(slope - _PROOF * math.sqrt(residual / sxx), 0.0)

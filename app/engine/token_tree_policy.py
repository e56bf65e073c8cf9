"""Whether γ auto drafts token trees: only where they have been measured to pay.

A tree buys tokens the main branch would have missed with a wider verify pass. Both sides are
measured on the rounds that ran a tree: tokens per second of the tree round as it ran, against
the same rounds had only the main branch been verified. That counterfactual is exact in tokens
(the rule draws the same tokens either way, so the main branch alone keeps the accepted path's
nodes on it, `RoundRecord.tree_bonus` fewer) and priced in seconds by the verify passes of
linear rounds, measured by rows as γ auto measures them (VerifyCurve). Trees run while they
beat that by a margin; otherwise linear drafts run and a tree is tried again now and then, so a
change of text or load can bring them back at a bounded cost.
"""

from __future__ import annotations

from typing import Literal

from app.engine.gamma_estimates import MIN_SECONDS, VerifyCurve
from app.metrics.rounds import RoundRecord

TreeMode = Literal["auto", "on", "off"]
TREE_MODES: tuple[TreeMode, ...] = ("auto", "on", "off")

# Tree rounds run before their worth is judged: one round's bonus is mostly luck.
_TRIAL_ROUNDS = 8
# Per tree round, how much of the evidence so far is kept: a few dozen rounds decide.
_FADE = 0.95
# Trees must beat the main branch alone by this share: a timer's jitter must not turn them on.
_MARGIN = 0.02
# While trees lose, one tree round is tried after this many linear ones (a tree round costs at
# most a few rows more than the linear one it replaces).
_RETRY_EVERY = 32
# Linear rounds measured before trees may run: the counterfactual needs their price.
_MIN_LINEAR_ROUNDS = 2


class TreeGate:
    """Decides each round whether the suffix index may propose a tree, from measured figures."""

    def __init__(self, mode: TreeMode = "auto") -> None:
        self.mode = mode
        self._linear = VerifyCurve(horizon=16, fade=1.0 - 1.0 / 128)
        self._linear_rounds = 0
        self._tree_rounds = 0
        self._since_tree = 0
        # Faded sums over tree rounds: tokens and seconds as run, and as the main branch alone.
        self._tokens = 0.0
        self._seconds = 0.0
        self._main_tokens = 0.0
        self._main_seconds = 0.0

    def wanted(self, under_auto: bool) -> bool:
        """Whether the next draft may be a tree (a fixed γ runs linear drafts unless forced)."""
        if self.mode != "auto":
            return self.mode == "on"
        if not under_auto or self._linear_rounds < _MIN_LINEAR_ROUNDS:
            return False
        if self._tree_rounds < _TRIAL_ROUNDS or self.pays():
            return True
        return self._since_tree >= _RETRY_EVERY

    def pays(self) -> bool:
        """Whether tree rounds so far made more tokens per second than their main branches
        alone would have."""
        if self._seconds <= 0.0 or self._main_seconds <= 0.0:
            return False
        tree_rate = self._tokens / self._seconds
        main_rate = self._main_tokens / self._main_seconds
        return tree_rate > (1.0 + _MARGIN) * main_rate

    def observe(self, record: RoundRecord) -> None:
        if record.drafted == 0:
            return
        if record.tree_nodes == 0:
            self._linear.add(record.drafted + 1, max(record.verify_s, MIN_SECONDS), record.depth)
            self._linear_rounds += 1
            self._since_tree += 1
            return
        self._tree_rounds += 1
        self._since_tree = 0
        self._linear.depth = record.depth
        main_verify = self._linear.predict(record.drafted + 1) if self._linear_rounds else 0.0
        self._tokens = self._tokens * _FADE + record.accepted + 1
        self._seconds = self._seconds * _FADE + record.verify_s + record.draft_s
        main_tokens = record.accepted - record.tree_bonus + 1
        self._main_tokens = self._main_tokens * _FADE + main_tokens
        self._main_seconds = self._main_seconds * _FADE + main_verify + record.draft_s

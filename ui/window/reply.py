"""Bookkeeping for the reply being generated: which modes it ran in and its stored stats.

Pure Python: the window feeds it the toggle's changes and the engine's result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.engine.result import GenerationResult
from ui.formatting import stats_line
from ui.window.speed_reference import Speedup


@dataclass
class ReplyInProgress:
    request_id: int
    conversation_id: int
    drafter_kind: str  # "none", "ngram" or "model" when the reply started
    drafter_label: str | None
    gamma_label: str  # "5" or "Auto"
    speculation_at_start: bool
    exact: bool = False  # every target pass checked two or more rows (GenerationConfig.exact)
    variation: str | None = None  # how this reply's settings differ from the user's, if they do
    replaces: int | None = None  # the stored reply this one regenerates, until it is saved
    toggles: list[bool] = field(default_factory=list)
    gamma_changes: list[str] = field(default_factory=list)  # γ set mid-reply, in order

    def on_toggle(self, on: bool) -> None:
        self.toggles.append(on)

    def on_gamma(self, label: str) -> None:
        """γ was set mid-reply ("2", "Auto"): the stats line names every γ that ran."""
        last = self.gamma_changes[-1] if self.gamma_changes else self.gamma_label
        if label != last:
            self.gamma_changes.append(label)

    @property
    def gammas_label(self) -> str:
        """ "5", or "5 → 2" when γ changed during the reply."""
        return " → ".join([self.gamma_label, *self.gamma_changes])

    @property
    def speculation_ever_on(self) -> bool:
        return self.speculation_at_start or any(self.toggles)

    @property
    def switched(self) -> bool:
        states = [self.speculation_at_start, *self.toggles]
        return any(s != states[0] for s in states)

    def shown_mode(self, result: GenerationResult) -> str:
        """plain unless a drafter existed and speculation was on for some of the reply.

        The engine runs every reply speculatively when a drafter is loaded (so the toggle can
        switch it on mid-reply); the reply's own mode is what the user asked for.
        """
        if self.drafter_kind == "none" or not self.speculation_ever_on:
            return "plain"
        return result.mode

    def stats(self, result: GenerationResult, *, speedup: Speedup | None = None) -> dict[str, Any]:
        """The dict stored with the message and shown under it. speedup: this reply's speed
        over plain decoding's, measured or estimated (ui/window/speed_reference.py)."""
        data = result.stats.to_dict()
        mode = self.shown_mode(result)
        data.update(
            mode=mode,
            draft=self.drafter_label if mode != "plain" else None,
            gamma_label=self.gammas_label,
            switched=self.switched and self.drafter_kind != "none",
            finish_reason=result.finish_reason,
            exact=self.exact,
            variation=self.variation,
            speedup=speedup.value if speedup and mode != "plain" else None,
            speedup_measured=speedup.measured if speedup and mode != "plain" else None,
        )
        if mode == "plain":
            # Nothing was drafted on purpose: say "—" rather than a rate over zero drafts.
            data["acceptance_rate"] = None if not data["drafted"] else data["acceptance_rate"]
        data["summary"] = stats_line(data)
        return data

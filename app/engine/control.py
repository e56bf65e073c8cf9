"""Live commands from the user to a running generation, read by the engine between rounds.

The window's worker thread owns the engine while the UI thread flips these flags; plain
attribute writes are atomic under the GIL, and the engine only reads them at round boundaries,
so no lock is needed. One field goes the other way: prompt_read, written by the engine.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GenerationControl:
    stop_requested: bool = False
    # False makes the next round a plain target step even if a drafter is loaded.
    speculative: bool = True
    # None keeps the generation's configured gamma; a number overrides it from the next round.
    gamma: int | None = None
    # Set when the receiver needs only the reply's first tokens (a stop string matched): what
    # the engine made past them is never shown, so nothing may learn from it.
    kept_tokens: int | None = None
    # Written by the engine while it reads a long prompt in parts: (tokens read, prompt tokens),
    # so a window can show how far the wait has come. None before and once the reply began.
    prompt_read: tuple[int, int] | None = None

    def stop(self) -> None:
        self.stop_requested = True

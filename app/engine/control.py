"""Live commands from the user to a running generation, read by the engine between rounds.

The window's worker thread owns the engine while the UI thread flips these flags; plain
attribute writes are atomic under the GIL, and the engine only reads them at round boundaries,
so no lock is needed. One field goes the other way: prompt_read, written by the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


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
    # Told each change of prompt_read, in the engine's thread: an RPC model's child process
    # sends it on to the window's process, whose control the window reads.
    on_prompt_read: Callable[[tuple[int, int] | None], None] | None = field(
        default=None, repr=False, compare=False
    )

    # A byte llama.cpp reads between a prompt batch's graph nodes (LlamaModel.stop_byte), set
    # with stop_requested: the stop reaches the pass with no Python running there.
    stop_byte: bytearray = field(
        default_factory=lambda: bytearray(2), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self.stop_byte[0] = self.stop_requested

    def stop(self) -> None:
        self.stop_requested = True
        self.stop_byte[0] = 1

    def read_prompt(self, read: tuple[int, int] | None) -> None:
        """The engine's side of prompt_read."""
        if read == self.prompt_read:
            return
        self.prompt_read = read
        if self.on_prompt_read is not None:
            self.on_prompt_read(read)

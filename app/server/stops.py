"""Stop strings: cut the reply where one appears, without ever streaming part of one."""

from __future__ import annotations

from collections.abc import Sequence


class StopMatcher:
    """Feed it reply text as it arrives; it returns the text that is safe to emit.

    Text that could be the start of a stop string is held back until the next piece decides
    it; once a stop string appears, everything from it on is dropped and `hit` is set.
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.hit = False

    def push(self, text: str) -> str:
        if self.hit:
            return ""
        if not self._stops:
            return text
        buffer = self._held + text
        found = [i for i in (buffer.find(s) for s in self._stops) if i >= 0]
        if found:
            self.hit = True
            self._held = ""
            return buffer[: min(found)]
        keep = self._partial_suffix(buffer)
        self._held = buffer[len(buffer) - keep :]
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        """The held-back text once the reply has ended without a stop string."""
        held, self._held = self._held, ""
        return "" if self.hit else held

    def _partial_suffix(self, buffer: str) -> int:
        """Length of the longest end of buffer that begins some stop string."""
        best = 0
        for stop in self._stops:
            for k in range(min(len(stop) - 1, len(buffer)), best, -1):
                if buffer.endswith(stop[:k]):
                    best = k
                    break
        return best

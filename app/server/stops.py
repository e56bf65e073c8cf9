"""Stop strings: cut the reply where one appears, without ever streaming part of one, and count
the reply by what was returned.

What a reply cut by a stop string reports, as llama-server reports it: `completion_tokens` (and
`timings.predicted_n`) count every token generated up to and including the one that completed
the stop string (its n_decoded), none after it even when a speculative round emitted more;
log probabilities cover only the tokens whose text begins in the returned text (llama-server
drops the stop word's tokens).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.engine.events import TokenEvent
from app.engine.logprobs import TokenLogprob
from app.engine.result import GenerationResult
from app.metrics.measured import decode_rate


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


@dataclass(frozen=True, slots=True)
class Piece:
    """Reply text safe to send, and the log probabilities of the tokens that begin in it."""

    text: str
    logprobs: tuple[TokenLogprob, ...] = ()


class ReplyCut:
    """A reply's token events through a StopMatcher: the text safe to send as they come, and
    once a stop string matched, the reply as the client is told it (`trimmed`)."""

    def __init__(self, stops: Sequence[str]) -> None:
        self._matcher = StopMatcher(stops)
        self.tokens = 0  # generated until a stop string matched (every one without a match)
        self._read = 0  # characters of reply text pushed
        self._sent: list[str] = []
        self._sent_chars = 0
        # Log probabilities of tokens whose text is not sent yet, by the offset it begins at.
        self._waiting: deque[tuple[int, TokenLogprob]] = deque()

    @property
    def hit(self) -> bool:
        return self._matcher.hit

    def push(self, event: TokenEvent) -> Piece:
        if self.hit:
            return Piece("")
        if event.token_id >= 0:  # -1: the decoder's last bytes, no token of their own
            self.tokens += 1
        if event.logprob is not None:
            self._waiting.append((self._read, event.logprob))
        self._read += len(event.text)
        return self._release(self._matcher.push(event.text))

    def flush(self) -> Piece:
        """What is left once the reply has ended."""
        piece = self._release(self._matcher.flush())
        if self.hit:
            return piece
        # Tokens with no text of their own at the very end (a character's first bytes).
        rest = tuple(logprob for _, logprob in self._waiting)
        self._waiting.clear()
        return Piece(piece.text, piece.logprobs + rest)

    def _release(self, text: str) -> Piece:
        self._sent.append(text)
        self._sent_chars += len(text)
        released = []
        while self._waiting and self._waiting[0][0] < self._sent_chars:
            released.append(self._waiting.popleft()[1])
        if self.hit:
            self._waiting.clear()  # they begin in the stop string or after it
        return Piece(text, tuple(released))

    def trimmed(self, result: GenerationResult) -> GenerationResult:
        """The engine's result as returned: when a stop string matched, its text, tokens and
        decode rate end at the token that completed it, and it finished with "stop". The
        speculation figures (rounds, drafted, accepted) stay as the rounds ran."""
        if not self.hit:
            return result
        kept = self.tokens
        stats = result.stats
        stats = replace(
            stats,
            generated_tokens=kept,
            tokens_per_second=decode_rate(kept, stats.generation_s),
        )
        return replace(
            result,
            text="".join(self._sent),
            token_ids=result.token_ids[:kept],
            finish_reason="stop",
            stats=stats,
            draft_token_mask=result.draft_token_mask[:kept],
        )

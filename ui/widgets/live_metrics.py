"""Metrics of the reply being generated, from what has streamed in so far.

Pure Python with an injected clock, so rates are testable without waiting. The figures use
app.metrics.summary' definitions; the engine's exact stats replace them when the reply finishes.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from app.metrics.rounds import RoundRecord
from app.metrics.summary import GenerationStats, summarize

Clock = Callable[[], float]

# The sparkline's tokens/s is the rate over this window, so it shows change, not the average.
RATE_WINDOW_S = 1.0
# Acceptance in the sparkline is over the last rounds, for the same reason.
ACCEPTANCE_WINDOW_ROUNDS = 8
MAX_SAMPLES = 240


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    tokens_per_second: float | None
    acceptance: float | None


@dataclass
class LiveReply:
    clock: Clock = time.perf_counter
    gamma: int = 0
    t_request: float = 0.0
    t_first: float | None = None
    t_last: float | None = None
    n_tokens: int = 0
    rounds: list[RoundRecord] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    _token_times: deque[float] = field(default_factory=deque)

    def start(self, gamma: int) -> None:
        self.gamma = gamma
        self.t_request = self.clock()
        self.t_first = self.t_last = None
        self.n_tokens = 0
        self.rounds = []
        self.samples = []
        self._token_times.clear()

    def on_token(self) -> None:
        now = self.clock()
        if self.t_first is None:
            self.t_first = now
        self.t_last = now
        self.n_tokens += 1
        self._token_times.append(now)

    def on_round(self, record: RoundRecord) -> None:
        self.rounds.append(record)

    @property
    def ttft_s(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_request

    def stats(self) -> GenerationStats:
        """The reply so far, in GenerationStats form.

        tokens/s counts tokens after the first over the time since the first, as the metric's
        definition asks.
        """
        span = (self.t_last - self.t_first) if self.t_first is not None and self.t_last else 0.0
        return summarize(
            self.rounds,
            prompt_tokens=0,
            generated_tokens=self.n_tokens,
            prompt_s=0.0,
            generation_s=span,
            ttft_s=self.ttft_s,
            plain_step_s=None,
        )

    def sample(self) -> Sample:
        """Record one sparkline point: recent tokens/s and recent acceptance."""
        now = self.clock()
        while self._token_times and self._token_times[0] < now - RATE_WINDOW_S:
            self._token_times.popleft()
        rate: float | None = None
        if self.t_first is not None:
            since_first = now - self.t_first
            if since_first >= RATE_WINDOW_S:
                rate = len(self._token_times) / RATE_WINDOW_S
            elif since_first > 0.05:
                # Younger than the window: count the tokens after the first over that time.
                rate = (len(self._token_times) - 1) / since_first
        recent = self.rounds[-ACCEPTANCE_WINDOW_ROUNDS:]
        drafted = sum(r.drafted for r in recent)
        acceptance = sum(r.accepted for r in recent) / drafted if drafted else None
        point = Sample(now - self.t_request, rate, acceptance)
        self.samples.append(point)
        del self.samples[:-MAX_SAMPLES]
        return point

"""Live metrics of a streaming reply, on a fake clock."""

from __future__ import annotations

import pytest

from app.metrics.rounds import RoundRecord
from tests.helpers.bench_data import round_record
from ui.widgets.live_metrics import ACCEPTANCE_WINDOW_ROUNDS, LiveReply


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def record(index: int, drafted: int, accepted: int) -> RoundRecord:
    return round_record(index, drafted, accepted, draft_s=0.01 * drafted, verify_s=0.02)


def test_nothing_streamed_reads_as_undefined() -> None:
    live = LiveReply(clock=FakeClock())
    live.start(gamma=4)
    stats = live.stats()
    assert stats.acceptance_rate is None and stats.tokens_per_second is None
    assert live.ttft_s is None
    assert live.sample().tokens_per_second is None


def test_ttft_rate_and_acceptance_from_the_stream() -> None:
    clock = FakeClock()
    live = LiveReply(clock=clock)
    live.start(gamma=4)
    clock.now += 0.25
    live.on_token()  # first token 250 ms after the request
    for _ in range(10):
        clock.now += 0.1
        live.on_token()
    live.on_round(record(0, 0, 0))
    live.on_round(record(1, 4, 3))
    live.on_round(record(2, 4, 1))
    stats = live.stats()
    assert live.ttft_s == pytest.approx(0.25)
    # Ten tokens after the first in one second: prompt time is left out.
    assert stats.tokens_per_second == pytest.approx(10.0)
    assert stats.acceptance_rate == pytest.approx(4 / 8)
    assert stats.accepted_per_round == pytest.approx(4 / 3)
    assert stats.per_position_acceptance == [1.0, 0.5, 0.5, 0.0]
    assert stats.draft_s == pytest.approx(0.08) and stats.verify_s == pytest.approx(0.06)


def test_sparkline_samples_use_recent_windows() -> None:
    clock = FakeClock()
    live = LiveReply(clock=clock)
    live.start(gamma=4)
    for _ in range(20):  # 20 tokens/s for a second
        clock.now += 0.05
        live.on_token()
    first = live.sample()
    for _ in range(5):  # then 5 tokens/s for two seconds
        clock.now += 0.2
        live.on_token()
    clock.now += 1.0
    for _ in range(5):
        clock.now += 0.2
        live.on_token()
    second = live.sample()
    assert first.tokens_per_second == pytest.approx(20.0)
    assert second.tokens_per_second == pytest.approx(5.0)
    for i in range(ACCEPTANCE_WINDOW_ROUNDS):
        live.on_round(record(i, 4, 0))  # old rounds, all rejected
    for i in range(ACCEPTANCE_WINDOW_ROUNDS):
        live.on_round(record(i, 4, 4))  # recent rounds, all accepted
    assert live.sample().acceptance == 1.0
    assert [s.t for s in live.samples] == sorted(s.t for s in live.samples)
    assert len(live.samples) == 3

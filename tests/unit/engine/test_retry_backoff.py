"""A draft left out turn after turn gets a turn again after 4, then 8, 16 turns out, up to the
last wait; a turn it wins on its merits brings the wait back to the first."""

from __future__ import annotations

from app.engine.retry_backoff import RetryBackoff


def _retried_at(backoff: RetryBackoff, turns: int) -> list[int]:
    retried = []
    for turn in range(turns):
        if backoff.due:
            backoff.ran()
            backoff.retried()
            retried.append(turn)
        else:
            backoff.left_out()
    return retried


def test_the_wait_doubles_after_each_retry_up_to_the_last() -> None:
    assert _retried_at(RetryBackoff(4, 16), 80) == [4, 13, 30, 47, 64]


def test_a_win_brings_the_wait_back_to_the_first() -> None:
    backoff = RetryBackoff(4, 16)
    _retried_at(backoff, 31)
    assert backoff.wait == 16
    backoff.ran()
    backoff.won()
    assert _retried_at(backoff, 10) == [4]

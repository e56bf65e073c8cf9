"""The folder lock that two windows' past-chats index writers share: one holder at a time, a
holder that never lets go is not waited for forever, and a folder it cannot open goes on."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app.engine.folder_lock import FolderBusyError, folder_lock
from tests.helpers.locks import lock_held_elsewhere


def test_the_lock_is_taken_when_free(tmp_path: Path) -> None:
    with folder_lock(tmp_path) as locked:
        assert locked


def test_a_second_holder_waits_for_the_first(tmp_path: Path) -> None:
    order: list[str] = []

    def second() -> None:
        with folder_lock(tmp_path) as locked:
            assert locked
            order.append("second")

    with folder_lock(tmp_path):
        waiter = threading.Thread(target=second)
        waiter.start()
        time.sleep(0.3)  # the second holder is blocked meanwhile
        order.append("first done")
    waiter.join(10)
    assert order == ["first done", "second"]


def test_a_holder_that_never_lets_go_is_given_up_on(tmp_path: Path) -> None:
    with lock_held_elsewhere(tmp_path):
        started = time.monotonic()
        with folder_lock(tmp_path, wait=0.2) as locked:
            assert not locked
        assert time.monotonic() - started < 5


def test_a_writer_that_asks_to_gives_up_instead_of_going_on_unlocked(tmp_path: Path) -> None:
    with (
        lock_held_elsewhere(tmp_path),
        pytest.raises(FolderBusyError),
        folder_lock(tmp_path, wait=0.1, give_up=True),
    ):
        pytest.fail("went on without the lock")


def test_a_missing_folder_goes_on_unlocked(tmp_path: Path) -> None:
    with folder_lock(tmp_path / "absent") as locked:
        assert not locked
    assert not (tmp_path / "absent").exists()

"""Signals in llama.cpp's callbacks: a handler that runs anywhere inside a marked callback, its
first line included, keeps its exception for the caller instead of raising it into ctypes."""

from __future__ import annotations

import sys
from types import FrameType

import pytest

from app.llama import callbacks


def _frame_in_helper() -> FrameType:
    return sys._getframe()


@callbacks.native_callback
def _marked_callback() -> FrameType:
    # A handler may run at the callback's first line or in anything the callback calls.
    return _frame_in_helper()


def _plain_function() -> FrameType:
    return _frame_in_helper()


def test_a_frame_called_from_a_marked_callback_is_inside_it() -> None:
    assert callbacks.in_callback(_marked_callback())
    assert not callbacks.in_callback(_plain_function())
    assert not callbacks.in_callback(None)


def test_outside_a_callback_the_exception_is_raised_at_once() -> None:
    with pytest.raises(KeyboardInterrupt):
        callbacks.raise_or_defer(KeyboardInterrupt(), _plain_function())
    assert not callbacks.deferred()


def test_inside_a_callback_the_first_exception_waits_for_the_caller() -> None:
    first, second = KeyboardInterrupt("first"), KeyboardInterrupt("second")
    callbacks.raise_or_defer(first, _marked_callback())
    callbacks.raise_or_defer(second, _marked_callback())
    assert callbacks.deferred()
    with pytest.raises(KeyboardInterrupt) as caught:
        callbacks.raise_deferred()
    assert caught.value is first
    assert not callbacks.deferred()
    callbacks.raise_deferred()  # nothing left: returns

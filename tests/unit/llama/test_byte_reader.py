"""The abort callback that runs no Python reads its flag byte as a bool, as llama.cpp calls it."""

from __future__ import annotations

import ctypes

import llama_cpp

from app.engine.control import GenerationControl
from app.llama.byte_reader import byte_reader


def test_the_callback_says_true_once_the_control_is_stopped() -> None:
    callback = byte_reader(llama_cpp)
    assert callback is not None
    control = GenerationControl()
    flag = (ctypes.c_char * len(control.stop_byte)).from_buffer(control.stop_byte)
    assert callback(ctypes.addressof(flag)) is False
    control.stop()
    assert callback(ctypes.addressof(flag)) is True


def test_a_control_made_stopped_has_its_byte_set() -> None:
    assert GenerationControl(stop_requested=True).stop_byte[0] == 1
    assert GenerationControl().stop_byte == bytearray(2)

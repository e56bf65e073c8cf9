"""An abort callback for llama.cpp that runs no Python: it reads one byte.

llama.cpp calls its abort callback between the graph's nodes, about a thousand times a pass. A
Python callback takes the GIL each time, which costs nothing while no other thread runs Python
and, with one that does, made a prompt batch take 3.7 times as long. The C library's `strlen`
does what is needed instead: called with the address of a two-byte buffer [flag, 0], it returns
0 or 1, the flag as a bool (the calling convention returns both in the same register, and a
length under 256 reads the same as a bool's low byte).
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any


@functools.cache
def byte_reader(lib: Any) -> Any:
    """The callback, as llama-cpp-python's ggml_abort_callback type; None where the C library
    cannot be found (then a stop waits for the batch to end)."""
    try:
        libc = ctypes.CDLL(None) if sys.platform != "win32" else ctypes.cdll.msvcrt
        strlen = libc.strlen
    except (OSError, AttributeError):
        return None
    return ctypes.cast(strlen, lib.ggml_abort_callback)

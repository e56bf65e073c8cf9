"""Stopping a reading pass inside llama_decode, through llama.cpp's abort callback, which it
calls between the graph's nodes: for a signal (app/llama/callbacks.py) or a Stop, whose
GenerationControl byte LlamaModel.stop_byte holds while a prompt is read."""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator
from typing import Any

from app.llama import callbacks
from app.llama.batches import PROMPT_ROWS
from app.llama.byte_reader import byte_reader

# Reading passes of this many rows or more (a prompt's batches, a draft model's catch-up) stop
# when a signal asks (app/llama/callbacks.py) or `stop_byte` is set. Not a step or a
# verification, which need a row of logits per token: they end within a few tens of
# milliseconds anyway, and a call into Python per graph node would cost them several per cent.
ABORTABLE_ROWS = 32


@contextlib.contextmanager
def stoppable_pass(
    lib: Any, ctx: Any, n_rows: int, n_outputs: int, stop_byte: bytearray | None
) -> Iterator[None]:
    """While open, llama_decode on `ctx` stops at the next graph node once a signal's exception
    waits or `stop_byte` is set, for a reading pass; it then returns 2 (aborted)."""
    signals = callbacks.passes_abortable() and threading.current_thread() is threading.main_thread()
    abort: object = None
    data: ctypes.Array[ctypes.c_char] | None = None  # alive until the pass returns
    if n_rows >= ABORTABLE_ROWS and n_outputs <= PROMPT_ROWS:
        if signals:

            @callbacks.native_callback
            def stop_now(_data: object) -> bool:
                # A signal's handler may run here, in this very call (app/llama/callbacks.py).
                return callbacks.deferred() or (stop_byte is not None and stop_byte[0] != 0)

            abort = lib.ggml_abort_callback(stop_now)
        elif stop_byte is not None:
            # Off the main thread no signal's handler can run in the pass, so llama.cpp reads
            # the byte itself (app/llama/byte_reader.py): a Python callback takes the GIL at
            # every graph node, and beside a thread running Python a batch took 3.7x as long.
            abort = byte_reader(lib)
            data = (ctypes.c_char * len(stop_byte)).from_buffer(stop_byte)
    if abort is None:
        yield
        return
    lib.llama_set_abort_callback(ctx, abort, None if data is None else ctypes.addressof(data))
    try:
        yield
    finally:
        lib.llama_set_abort_callback(ctx, lib.ggml_abort_callback(), None)

"""A signal, or a Stop, that lands while llama.cpp reads a prompt batch stops the pass at its
next graph node (llama.cpp's abort callback), where it used to wait for the whole batch, and
the cache holds exactly what it held before the pass."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import numpy as np
import pytest

from app.cli.signals import Interrupted, interrupt_on_signals
from app.engine.control import GenerationControl
from app.engine.prompt_pass import read_prompt
from app.llama import callbacks
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel
from app.llama.pass_abort import ABORTABLE_ROWS

pytestmark = pytest.mark.model


class _DecodeWatch:
    """Stands between the model and llama.cpp's llama_decode: says when a long pass has begun
    and keeps every pass's return code."""

    def __init__(self, lib: Any, *, nth: int = 1) -> None:
        self._lib = lib
        self.long_pass = threading.Event()  # set as the nth long pass begins
        self._nth = nth
        self._long_passes = 0
        self.codes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)

    def llama_decode(self, ctx: Any, batch: Any) -> int:
        if batch.n_tokens >= ABORTABLE_ROWS:
            self._long_passes += 1
            if self._long_passes == self._nth:
                self.long_pass.set()
        rc = int(self._lib.llama_decode(ctx, batch))
        self.codes.append(rc)
        return rc


def test_a_signal_during_a_prompt_batch_stops_the_pass(demo_models: Any) -> None:
    config = ModelConfig(str(demo_models.f32), n_ctx=1024, n_batch=512, n_threads=2)
    with LlamaModel(config) as model:
        history = model.tokenize("The lighthouse keeper counted the waves again. " * 60)[:500]
        expected = model.feed(history[:40], 1).copy()
        model.truncate(10)
        watch = _DecodeWatch(model._lib)
        model._lib = watch

        def signal_once_reading() -> None:
            if watch.long_pass.wait(timeout=60):
                threading.Event().wait(0.02)  # inside the pass, a few nodes in
                os.kill(os.getpid(), signal.SIGINT)

        sender = threading.Thread(target=signal_once_reading)
        sender.start()
        try:
            with pytest.raises(Interrupted), interrupt_on_signals():
                model.feed(history, 1)
        finally:
            sender.join()
        assert watch.codes[-1] == 2  # llama.cpp aborted the pass, not ended it
        assert not callbacks.deferred()
        assert model.tokens == history[:10]  # nothing of the stopped call is kept
        assert np.array_equal(model.feed(history[:40], 1), expected)
        # Outside the commands' handlers no pass is abortable: a signal waits for Python.
        assert not callbacks.passes_abortable()


def test_stop_during_a_prompt_batch_ends_the_reading_inside_the_batch(demo_models: Any) -> None:
    config = ModelConfig(str(demo_models.f32), n_ctx=2048, n_batch=512, n_threads=2)
    with LlamaModel(config) as model:
        prompt = model.tokenize("The lighthouse keeper counted the waves again. " * 160)[:1500]
        expected = read_prompt(model, prompt, GenerationControl())
        assert expected is not None
        model.reset()
        watch = _DecodeWatch(model._lib, nth=2)  # the first batch read, the second cut
        model._lib = watch
        control = GenerationControl()

        def stop_once_reading() -> None:
            if watch.long_pass.wait(timeout=60):
                threading.Event().wait(0.02)
                control.stop()

        stopper = threading.Thread(target=stop_once_reading)
        stopper.start()
        try:
            assert read_prompt(model, prompt, control) is None
        finally:
            stopper.join()
        assert watch.codes[-1] == 2  # stopped inside the batch, not after it
        assert model.stop_byte is None
        # What the cache keeps is whole batches of the prompt, and reading on from it gives
        # the very row a reading from scratch gives.
        assert model.tokens == prompt[:512]
        assert model.reused == 0  # what the pass found held: nothing, not its first batch
        again = read_prompt(model, prompt, GenerationControl())
        assert again is not None and np.array_equal(again, expected)

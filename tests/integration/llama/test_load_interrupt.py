"""A Ctrl-C or SIGTERM that lands while llama.cpp is calling back into Python during a load (its
log, the load's progress) ends the load and reaches the command as Interrupted: ctypes drops an
exception raised in a callback, so the signal used to be lost and the command ran on."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from app.cli.signals import Interrupted, interrupt_on_signals
from app.llama import callbacks
from app.llama.backend import LLAMA_LOG_NAME, ensure_backend
from app.llama.config import ModelConfig
from app.llama.model import LlamaModel

pytestmark = pytest.mark.model


def _config(demo_models: Any) -> ModelConfig:
    return ModelConfig(str(demo_models.q4_1), n_ctx=256, n_threads=1)


class _SignalOnFirstRecord(logging.Handler):
    """Sends SIGINT to this process from inside llama.cpp's log callback, once."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.sent = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.sent and "llama_model_loader" in record.getMessage():
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture
def signal_in_log() -> Iterator[_SignalOnFirstRecord]:
    ensure_backend()
    logger = logging.getLogger(LLAMA_LOG_NAME)
    handler, level = _SignalOnFirstRecord(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_a_signal_in_the_log_callback_ends_the_load_as_interrupted(
    demo_models: Any, signal_in_log: _SignalOnFirstRecord
) -> None:
    fractions: list[float] = []
    with pytest.raises(Interrupted), interrupt_on_signals():
        LlamaModel(_config(demo_models), progress=lambda f: fractions.append(f) or True)
    assert signal_in_log.sent
    assert not fractions or max(fractions) < 1.0  # stopped, not loaded whole
    assert not callbacks.deferred()


def test_a_signal_in_the_progress_callback_ends_the_load_as_interrupted(
    demo_models: Any,
) -> None:
    reports: list[float] = []

    def progress(fraction: float) -> bool:
        reports.append(fraction)
        if len(reports) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return True

    with pytest.raises(Interrupted) as caught, interrupt_on_signals():
        LlamaModel(_config(demo_models), progress=progress)
    assert caught.value.signum == signal.SIGTERM
    assert max(reports) < 1.0
    # The next load, with no signal, is not cancelled by the one before.
    with LlamaModel(_config(demo_models)) as model:
        assert not model.closed

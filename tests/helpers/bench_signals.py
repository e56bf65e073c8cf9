"""A signal sent to this process from inside `specchat bench`, at a chosen progress report."""

from __future__ import annotations

import os

import pytest

import app.cli.bench


def signal_at_progress(monkeypatch: pytest.MonkeyPatch, done: int, signum: int) -> None:
    """Send `signum` when the bench reports `done` runs (0: the first run, or a server's
    warm-up request, has just begun)."""

    def progress(reported: int, _total: int, _message: str) -> None:
        if reported == done:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(app.cli.bench, "_progress", progress)

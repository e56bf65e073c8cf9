"""Thread settings: the OpenMP wait policy is set before llama.cpp loads unless the user chose
one, and the contention benchmark measures what it says."""

from __future__ import annotations

import os
from typing import Any

import pytest

from app.bench.contention import Candidate, candidates, measure
from app.llama.threads import SPIN_ENV, configure_openmp, default_thread_count, physical_cores


def test_the_wait_policy_is_set_when_the_user_set_none(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in SPIN_ENV:
        monkeypatch.delenv(key, raising=False)
    configure_openmp()
    assert {key: os.environ[key] for key in SPIN_ENV} == SPIN_ENV


def test_a_wait_policy_the_user_set_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    configure_openmp()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_the_benchmark_compares_the_old_spinning_setting_with_the_default() -> None:
    chosen = candidates()
    before = chosen[0]
    assert before.threads == physical_cores() and before.env["OMP_WAIT_POLICY"] == ""
    default = next(c for c in chosen if c.label.startswith("default"))
    assert default.threads == default_thread_count() and default.env == SPIN_ENV


def test_one_measurement_runs_the_real_cli_and_reports_a_rate(demo_models: Any) -> None:
    rate = measure(str(demo_models.f32), Candidate("one thread", 1, dict(SPIN_ENV)), 4)
    assert rate > 0

"""The hostile-file corpus through the real command line, each run in its own process:
`models inspect FILE`, `generate --target FILE` and `generate --draft FILE`.

Whatever the file, no run dies of a signal, prints a traceback, hangs or takes 1 GB; a refusal is
exactly one `error:` line on stderr with exit status 1. (A file that crashes llama.cpp is loaded
by the child-process check, whose death is reported, not shared.)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.helpers.hostile_gguf import Case, build_corpus
from tests.helpers.measure import Measured, run_measured
from tests.helpers.model_files import bundled_q4_1

REPO_ROOT = Path(__file__).resolve().parents[3]
HANG_GUARD_S = 120.0  # a run still going after this is a hang; typical runs take seconds
MEMORY_LIMIT = 1024**3
GENERATE = ["generate", "--prompt", "hi", "--max-tokens", "2", "--threads", "1", "--n-ctx", "64"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    return build_corpus(bundled_q4_1(), tmp_path_factory.mktemp("hostile-cli"))


def _cli(*args: str) -> Measured:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return run_measured(
        [sys.executable, "-m", "app.cli", *args],
        timeout_s=HANG_GUARD_S,
        env=env,
        cwd=str(REPO_ROOT),
    )


def _check_run(label: str, run: Measured, *, refused: bool) -> None:
    assert not run.timed_out, f"{label}: still running after {HANG_GUARD_S:.0f} s"
    assert not run.signal_death, f"{label}: died of signal {-run.returncode}"
    assert "Traceback" not in run.stderr, f"{label}: {run.stderr}"
    assert run.max_rss_bytes < MEMORY_LIMIT, f"{label}: peak {run.max_rss_bytes >> 20} MiB"
    if refused:
        lines = run.stderr.splitlines()
        assert run.returncode == 1, f"{label}: exit {run.returncode}, {run.stderr}"
        assert len(lines) == 1 and lines[0].startswith("error: "), f"{label}: {run.stderr!r}"
        assert "\x1b" not in run.stderr
    else:
        assert run.returncode == 0 and run.stderr == "", f"{label}: {run.stderr!r}"


@pytest.mark.model
def test_models_inspect_on_every_hostile_file(corpus: list[Case]) -> None:
    for case in corpus:
        run = _cli("models", "inspect", str(case.path))
        _check_run(f"inspect {case.name}", run, refused=case.refuse is not None)
        if case.refuse is not None:
            assert case.refuse.lower() in run.stderr.lower(), case.name
        else:
            assert "\x1b" not in run.stdout and "\x07" not in run.stdout, case.name


@pytest.mark.model
def test_generate_with_every_hostile_file_as_target(corpus: list[Case]) -> None:
    for case in corpus:
        run = _cli(*GENERATE, "--target", str(case.path))
        _check_run(f"target {case.name}", run, refused=True)
    crash = next(c for c in corpus if c.name == "duplicate-token-crashes-llama")
    again = _cli(*GENERATE, "--target", str(crash.path))
    assert "crashed" in again.stderr and "found by an earlier check" in again.stderr


@pytest.mark.model
def test_generate_with_every_hostile_file_as_draft(corpus: list[Case], demo_models: object) -> None:
    target = str(demo_models.q4_0)  # type: ignore[attr-defined]
    for case in corpus:
        run = _cli(*GENERATE, "--target", target, "--draft", str(case.path))
        _check_run(f"draft {case.name}", run, refused=True)

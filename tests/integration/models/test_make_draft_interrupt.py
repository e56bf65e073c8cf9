"""Ctrl+C / SIGTERM during `specchat models make-draft` ends it, leaving no file behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from models.demo import DemoModels

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_make_draft_with_one_line_and_no_file(
    demo_models: DemoModels, tmp_path: Path, signum: int
) -> None:
    target = demo_models.f32  # seconds of work to quantize
    out = tmp_path / "draft.gguf"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli.main",
            "models",
            "make-draft",
            str(target),
            "--type",
            "Q8_0",
            "--out",
            str(out),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Signal once the quantizer is writing (its partial file exists), not before.
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("*.partial")) and proc.poll() is None:
        assert time.monotonic() < deadline, "make-draft never started writing"
        time.sleep(0.02)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum
    assert stderr.splitlines()[-1] == "error: interrupted"
    assert "Exception ignored" not in stderr and "Traceback" not in stderr
    assert stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []

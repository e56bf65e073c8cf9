"""SPECCHAT_LLAMA_LOG=1 shows llama.cpp's own log on stderr; without it, stderr stays quiet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from app.llama.backend import LLAMA_LOG_ENV

pytestmark = pytest.mark.model
ONE_TOKEN = ["--max-tokens", "1", "--threads", "1", "--prompt", "Hello", "--json"]


def generate_one_token(model: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != LLAMA_LOG_ENV}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "generate", "--target", model, *ONE_TOKEN],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_log_reaches_stderr_only_when_asked_for(demo_models: Any) -> None:
    quiet = generate_one_token(str(demo_models.q4_1))
    loud = generate_one_token(str(demo_models.q4_1), **{LLAMA_LOG_ENV: "1"})
    assert quiet.returncode == 0 and loud.returncode == 0, (quiet.stderr, loud.stderr)
    # The model loader names the file it reads and where its weights went.
    assert "llama_model_loader" not in quiet.stderr
    assert "llama_model_loader" in loud.stderr
    assert "model buffer size" in loud.stderr
    # The command's own output stays on stdout, unchanged.
    assert json.loads(quiet.stdout)["token_ids"] == json.loads(loud.stdout)["token_ids"]

"""`--flash-attn` reaches llama.cpp for both models; auto keeps it off in host memory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest

from app.errors import InvalidSettingError
from app.llama.backend import LLAMA_LOG_ENV
from app.llama.config import ModelConfig

pytestmark = pytest.mark.model
ONE_TOKEN = ["--max-tokens", "1", "--threads", "1", "--prompt", "Hello", "--json"]
# llama.cpp's llama_context prints the setting each context was made with.
SETTING = re.compile(r"llama_context: flash_attn\s*=\s*(\w+)")


def context_settings(demo_models: Any, *flags: str) -> list[str]:
    env = {**os.environ, LLAMA_LOG_ENV: "1"}
    command = [sys.executable, "-m", "app.cli", "generate", "--target", str(demo_models.f32)]
    command += ["--draft", str(demo_models.q4_1), *ONE_TOKEN, *flags]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return SETTING.findall(done.stderr)


def test_flash_attention_follows_the_flag_for_target_and_draft(demo_models: Any) -> None:
    assert context_settings(demo_models, "--flash-attn", "on") == ["enabled", "enabled"]
    assert context_settings(demo_models, "--flash-attn", "off") == ["disabled", "disabled"]
    # A CPU-only build holds every weight in host memory: auto keeps flash attention off.
    assert context_settings(demo_models) == ["disabled", "disabled"]


def test_an_unknown_flash_attention_setting_is_refused_in_one_sentence() -> None:
    with pytest.raises(InvalidSettingError, match="flash attention must be auto, on or off"):
        ModelConfig("model.gguf", flash_attn="fast").validate()  # type: ignore[arg-type]

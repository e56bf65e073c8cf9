"""`specchat serve --gamma 0` (or `off`) serves with speculation off, as `speculative.n_max: 0`
means off in a request: one spelling of γ everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.server.conftest import ROOT, SHARED_ARGS, _wait_for_port


@pytest.mark.parametrize("spelling", ["0", "off"])
def test_serve_with_gamma_off_answers_by_plain_decoding(
    demo_models: Any, tmp_path: Path, spelling: str
) -> None:
    log_path = tmp_path / "server.log"
    command = [sys.executable, "-m", "app.cli", "serve", "--target", str(demo_models.f32)]
    command += ["--draft", str(demo_models.q4_1), "--gamma", spelling, "--port", "0"]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*command, *SHARED_ARGS], stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT
        )
    try:
        port = _wait_for_port(proc, log_path)
        body = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 12}
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=300) as response:
            reply = json.loads(response.read())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert reply["speculation"]["mode"] == "plain"
    assert reply["speculation"]["n_max"] == 0
    assert reply["speculation"]["gamma_setting"] == "off"
    assert reply["timings"]["draft_n"] == 0
    assert reply["choices"][0]["message"]["content"]

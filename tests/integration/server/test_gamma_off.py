"""`specchat serve --gamma 0` (or `off`) serves with speculation off, as `speculative.n_max: 0`
means off in a request: one spelling of γ everywhere. A server with no draft (`--draft none`)
decodes plainly whatever a request asks, and says so."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.server.conftest import ROOT, SHARED_ARGS, _wait_for_port

SAY_HELLO = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 12}


def _served_reply(target: Path, log_path: Path, flags: list[str], body: dict[str, Any]) -> Any:
    command = [sys.executable, "-m", "app.cli", "serve", "--target", str(target), *flags]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*command, "--port", "0", *SHARED_ARGS], stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT
        )
    try:
        port = _wait_for_port(proc, log_path)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.loads(response.read())
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("spelling", ["0", "off"])
def test_serve_with_gamma_off_answers_by_plain_decoding(
    demo_models: Any, tmp_path: Path, spelling: str
) -> None:
    flags = ["--draft", str(demo_models.q4_1), "--gamma", spelling]
    reply = _served_reply(demo_models.f32, tmp_path / "server.log", flags, SAY_HELLO)
    assert reply["speculation"]["mode"] == "plain"
    assert reply["speculation"]["n_max"] == 0
    assert reply["speculation"]["gamma_setting"] == "off"
    assert reply["timings"]["draft_n"] == 0
    assert reply["choices"][0]["message"]["content"]


def test_serve_with_no_draft_says_a_requested_n_max_was_not_used(
    demo_models: Any, tmp_path: Path
) -> None:
    body = {**SAY_HELLO, "speculative": {"n_max": 8}}
    reply = _served_reply(demo_models.f32, tmp_path / "server.log", ["--draft", "none"], body)
    speculation = reply["speculation"]
    assert speculation["mode"] == "plain"
    assert (speculation["n_max"], speculation["gamma_setting"]) == (0, "off")
    assert any("--draft none" in notice for notice in speculation["notices"])
    assert reply["timings"]["draft_n"] == 0

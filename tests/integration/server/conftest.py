"""Real `specchat serve` processes on the demo models, shared by the server tests: one with the
models' own chat template, and for tool calls one more with a Hermes-style tool template.

Starting a server loads two models, and the machine's CPUs are scarce, so the tests share one
process (session scope) and talk to it only on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.tool_templates import HERMES_TEMPLATE

ROOT = Path(__file__).resolve().parents[3]
API_KEY = "test-key-123"
GAMMA = 4
MAX_TOKENS = 48
N_CTX = 512
QUEUE_SIZE = 4
# Short enough for a test to wait out, long enough for any whole request on loopback.
HEADER_TIMEOUT_S = 3
BODY_TIMEOUT_S = 3
MAX_CONNECTIONS = 12
ALLOWED_HOST = "specchat.test"
CORS_ORIGIN = "http://allowed.example"
# Settings the server and the `generate` reference share: exact greedy on one thread.
SHARED_ARGS = ("--exact", "--threads", "1", "--n-ctx", str(N_CTX))
_READY = re.compile(r"at http://127\.0\.0\.1:(\d+)/v1")


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def request(
        self,
        method: str,
        path: str,
        body: bytes | dict[str, Any] | None = None,
        *,
        key: str | None = API_KEY,
        headers: dict[str, str | None] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """One raw HTTP request; returns the status and the JSON body.

        headers add to or (None) remove the default ones; a Host given replaces http.client's."""
        status, _headers, payload = self.exchange(method, path, body, key=key, headers=headers)
        return status, payload

    def exchange(
        self,
        method: str,
        path: str,
        body: bytes | dict[str, Any] | None = None,
        *,
        key: str | None = API_KEY,
        headers: dict[str, str | None] | None = None,
    ) -> tuple[int, http.client.HTTPMessage, dict[str, Any]]:
        """request(), also returning the response's headers."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        sent: dict[str, str | None] = {"Content-Type": "application/json"}
        if key is not None:
            sent["Authorization"] = f"Bearer {key}"
        sent.update(headers or {})
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        try:
            conn.request(
                method,
                path,
                body=data,
                headers={name: value for name, value in sent.items() if value is not None},
            )
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        return response.status, response.headers, json.loads(raw)

    def health(self) -> dict[str, Any]:
        status, body = self.request("GET", "/health", key=None)
        assert status == 200
        return dict(body["requests"])

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


@contextlib.contextmanager
def _serving(demo_models: Any, log_path: Path, *extra: str) -> Iterator[Server]:
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli",
                "serve",
                "--target",
                str(demo_models.f32),
                "--draft",
                str(demo_models.q4_1),
                "--gamma",
                str(GAMMA),
                "--max-tokens",
                str(MAX_TOKENS),
                "--port",
                "0",
                "--api-key",
                API_KEY,
                "--queue-size",
                str(QUEUE_SIZE),
                "--header-timeout",
                str(HEADER_TIMEOUT_S),
                "--body-timeout",
                str(BODY_TIMEOUT_S),
                "--max-connections",
                str(MAX_CONNECTIONS),
                "--allow-host",
                ALLOWED_HOST,
                "--cors-origin",
                CORS_ORIGIN,
                *SHARED_ARGS,
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd=ROOT,
        )
    try:
        server = Server(proc, _wait_for_port(proc, log_path), log_path)
        assert server.health()["served"] == 0
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # SIGTERM is a normal stop: replies in flight end, the models are freed, no traceback.
    assert proc.returncode == 0, log_path.read_text()
    assert "Traceback" not in log_path.read_text()


@pytest.fixture(scope="session")
def server(demo_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The demo pair with its own chat template, which offers no tools."""
    with _serving(demo_models, tmp_path_factory.mktemp("server") / "server.log") as server:
        yield server


@pytest.fixture(scope="session")
def suffix_server(demo_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The demo target drafting from the suffix index alone (`--draft suffix`): certain drafts,
    and a question asked again drafted whole from the answer the server gave before."""
    folder = tmp_path_factory.mktemp("suffix-server")
    with _serving(demo_models, folder / "server.log", "--draft", "suffix") as server:
        yield server


@pytest.fixture(scope="session")
def hermes_server(demo_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The demo pair served with a Hermes-style tool template (`--chat-template-file`)."""
    folder = tmp_path_factory.mktemp("hermes-server")
    template = folder / "hermes.jinja"
    template.write_text(HERMES_TEMPLATE, encoding="utf-8")
    args = ("--chat-template-file", str(template))
    with _serving(demo_models, folder / "server.log", *args) as server:
        yield server


def _wait_for_port(proc: subprocess.Popen[bytes], log_path: Path) -> int:
    deadline = time.monotonic() + 300  # the first run builds the demo models' cache
    while time.monotonic() < deadline:
        match = _READY.search(log_path.read_text(encoding="utf-8", errors="replace"))
        if match:
            return int(match.group(1))
        if proc.poll() is not None:
            raise AssertionError(f"the server exited:\n{log_path.read_text()}")
        time.sleep(0.2)
    raise AssertionError(f"the server never said where it listens:\n{log_path.read_text()}")


@pytest.fixture(scope="session")
def reference(demo_models: Any) -> Any:
    """`specchat generate --exact --json` for a prompt: the text the server must reproduce."""

    @cache
    def run(prompt: str, chat: bool = True, max_tokens: int = MAX_TOKENS) -> str:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "app.cli",
                "generate",
                "--target",
                str(demo_models.f32),
                "--draft",
                str(demo_models.q4_1),
                "--gamma",
                str(GAMMA),
                "--max-tokens",
                str(max_tokens),
                *SHARED_ARGS,
                *(("--chat",) if chat else ("--raw",)),
                "--prompt",
                prompt,
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        text = json.loads(proc.stdout)["text"]
        assert isinstance(text, str) and text
        return text

    return run

"""`specchat worker`: what it says when it starts, and its refusals in one line."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from app.cli.main import main
from app.llama import rpc
from tests.helpers.rpc_workers import REPO, free_port

GUARD_S = 60


def _worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "worker", "--threads", "1", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _first_line_then_stop(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    try:
        return proc.stderr.readline()
    finally:
        proc.kill()
        proc.communicate(timeout=GUARD_S)


def test_a_loopback_worker_starts_without_a_warning() -> None:
    line = _first_line_then_stop(_worker("--port", str(free_port())))
    assert line.startswith("specchat worker: serving CPU on 127.0.0.1:")


def test_a_worker_open_to_the_network_warns_what_anyone_there_can_do() -> None:
    line = _first_line_then_stop(_worker("--host", "0.0.0.0", "--port", str(free_port())))
    assert line.startswith("warning: listening on 0.0.0.0:")
    assert "no authentication" in line
    assert "read and write" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--device", "NoSuchGPU"), "no device named 'NoSuchGPU' here (devices: CPU"),
        (("--threads", "0"), "--threads must be at least 1"),
        (("--port", "70000"), "--port must be 1..65535"),
    ],
)
def test_bad_settings_are_one_error_line(args: tuple[str, ...], message: str) -> None:
    proc = _worker("--port", str(free_port()), *args)
    _, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 1
    assert err.strip().splitlines()[-1].startswith(f"error: {message}")
    assert "Traceback" not in err


def test_a_port_in_use_is_refused_in_words() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = _worker("--port", str(port))
        _, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 1
    assert err.strip() == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"


@pytest.mark.parametrize(
    "argv",
    [
        ["worker"],
        ["generate", "--target", "any.gguf", "--prompt", "Hi", "--rpc", "127.0.0.1:50052"],
    ],
)
def test_a_build_without_rpc_says_how_to_rebuild_in_one_line(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(rpc, "supports_rpc", lambda: False)
    assert main(argv) == 1
    err = capsys.readouterr().err
    hint = f"rebuild it with: {rpc.REBUILD_COMMAND}"
    assert err == f"error: this llama-cpp-python was built without RPC; {hint}\n"
    assert "-DGGML_RPC=on" in rpc.REBUILD_COMMAND

"""`specchat worker`: what it says when it starts, its key, and its refusals in one line."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.llama import rpc
from app.llama.rpc_token import parse_token
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


def _start_lines_then_stop(proc: subprocess.Popen[str]) -> list[str]:
    """What a keyed worker prints up to its certificate fingerprint (its last start line)."""
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        while not lines or "certificate fingerprint" not in lines[-1]:
            line = proc.stderr.readline()
            assert line, f"the worker ended early: {lines}"
            lines.append(line.rstrip("\n"))
        return lines
    finally:
        proc.kill()
        proc.communicate(timeout=GUARD_S)


def _show_key(env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", "worker", "--show-key"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        check=True,
    )
    return proc.stdout.strip()


def test_ctrl_c_stops_a_worker_cleanly() -> None:
    # Ctrl+C is how a worker is meant to stop: no error line, exit status 0.
    proc = _worker("--port", str(free_port()))
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()
        while line and "certificate fingerprint" not in line:
            line = proc.stderr.readline()
        assert line, "the worker ended before serving"
        proc.send_signal(signal.SIGINT)
        _, after = proc.communicate(timeout=GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 0
    assert "error" not in after and "Traceback" not in after, after


def test_the_key_is_made_and_printed_at_the_first_start_only(isolated_data_dir: Path) -> None:
    first = _start_lines_then_stop(_worker("--host", "0.0.0.0", "--port", str(free_port())))
    assert first[0].startswith("specchat worker: serving CPU on 0.0.0.0:")
    assert "TLS, key required" in first[0]
    assert not any(line.startswith("warning") for line in first)
    token = str(parse_token(first[1].rsplit(" ", 1)[1]))
    assert f"--rpc {token}@" in first[2]
    again = _start_lines_then_stop(_worker("--port", str(free_port())))
    assert not any(token in line for line in again)
    assert "--show-key" in again[1]
    assert _show_key() == token
    folder = isolated_data_dir / "worker"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("key", "tls.pem"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600


def test_a_passphrase_from_the_environment_replaces_the_stored_key(
    isolated_data_dir: Path,
) -> None:
    stored = _show_key()
    env = dict(os.environ, SPECCHAT_WORKER_KEY="correct horse battery staple")
    given = _show_key(env)
    assert given != stored
    assert parse_token(given).fingerprint == parse_token(stored).fingerprint  # same certificate
    assert _show_key(env) == given  # the same passphrase always gives the same key


def test_a_short_passphrase_is_one_error_line() -> None:
    proc = _worker("--port", str(free_port()), "--key", "too short")
    _, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 2  # a usage error, refused before anything starts
    assert err.strip() == (
        "error: the worker key must be at least 16 characters, got 9 (see specchat worker --help)"
    )


def test_a_plain_worker_warns_what_anyone_there_can_do() -> None:
    port = free_port()
    line = _first_line_then_stop(
        _worker("--host", "0.0.0.0", "--port", str(port), "--insecure-plain")
    )
    assert line.startswith(f"warning: --insecure-plain on 0.0.0.0:{port}:")
    assert "no authentication" in line
    assert "any memory of its process" in line


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (("--device", "NoSuchGPU"), 1, "no device named 'NoSuchGPU' here (devices: CPU"),
        (("--threads", "0"), 2, "--threads must be in 1..1024, got 0"),
        (("--port", "70000"), 2, "--port must be 1..65535"),
    ],
)
def test_bad_settings_are_one_error_line(args: tuple[str, ...], status: int, message: str) -> None:
    proc = _worker("--port", str(free_port()), *args)
    _, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == status
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

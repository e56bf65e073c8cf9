"""`specchat serve` refuses bad settings in one `error:` line, before loading any model, and
stops cleanly on Ctrl+C or SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.server.host import exposure_warning

ROOT = Path(__file__).resolve().parents[3]


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )


def assert_user_error(proc: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--port", "70000"), "--port"),
        (("--gamma", "40"), "--gamma"),
        (("--gamma", "fast"), "--gamma"),
        (("--queue-size", "0"), "--queue-size"),
        (("--top-p", "1.5"), "top-p"),
        (("--header-timeout", "0"), "--header-timeout"),
        (("--body-timeout", "nan"), "--body-timeout"),
        (("--max-connections", "0"), "--max-connections"),
        (("--max-messages", "-1"), "--max-messages"),
        (("--max-prompt-chars", "0"), "--max-prompt-chars"),
    ],
    ids=[
        "port",
        "gamma-range",
        "gamma-word",
        "queue",
        "top-p",
        "header-timeout",
        "body-timeout",
        "max-connections",
        "max-messages",
        "max-prompt-chars",
    ],
)
def test_bad_setting_is_one_error_line(args: tuple[str, ...], fragment: str) -> None:
    # The target does not exist: reaching the load would give a different error.
    assert_user_error(serve("--target", "missing.gguf", *args), fragment)


def test_a_taken_port_fails_before_loading(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = serve("--target", str(tmp_path / "missing.gguf"), "--port", str(port))
    assert_user_error(proc, f"cannot listen on 127.0.0.1:{port}")


def test_a_missing_target_is_one_error_line(tmp_path: Path) -> None:
    proc = serve("--target", str(tmp_path / "missing.gguf"), "--port", "0")
    assert_user_error(proc, "missing.gguf")


def test_only_non_loopback_hosts_get_the_warning() -> None:
    assert exposure_warning("127.0.0.1", "127.0.0.1", keyed=False) is None
    assert exposure_warning("localhost", "::1", keyed=False) is None
    warning = exposure_warning("0.0.0.0", "0.0.0.0", keyed=False)
    assert warning is not None and warning.startswith("warning: ") and "API key" in warning
    assert "--allow-host" in warning  # 0.0.0.0 has no name a client could address it by
    keyed = exposure_warning("192.168.1.5", "192.168.1.5", keyed=True)
    assert keyed is not None and "API key" not in keyed and "--allow-host" not in keyed
    assert "\n" not in warning


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_the_server_cleanly(demo_models: Any, signum: int) -> None:
    # Ctrl+C is how a server is meant to stop: no error line, exit status 0, as with SIGTERM.
    command = [sys.executable, "-m", "app.cli", "serve", "--target", str(demo_models.q4_0)]
    command += ["--draft", "none", "--port", "0", "--n-ctx", "512", "--threads", "1"]
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    try:
        started = [proc.stderr.readline()]
        while started[-1] and "Ctrl+C stops" not in started[-1]:
            started.append(proc.stderr.readline())
        assert started[-1], f"the server ended before serving: {started}"
        proc.send_signal(signum)
        _out, after = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    assert "error" not in after and "Traceback" not in after, after

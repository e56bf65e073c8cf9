"""`bench --server`: the sampling flags reach every server in every request, and the flags of
models loaded here, which a running server cannot honour, are refused like --exact, never
silently dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import app.bench.remote
import app.cli.bench
from app.bench.openai_stream import Endpoint, StreamedReply
from app.cli.main import main

SERVER = ["bench", "--server", "http://127.0.0.1:9", "--prompts", "builtin:chat", "--quiet"]


@pytest.mark.parametrize(
    "flags",
    [
        ["--gamma", "4"],
        ["--suffix", "off"],
        ["--trees", "on"],
        ["--threads", "2"],
        ["--n-ctx", "512"],
        ["--n-gpu-layers", "0"],
        ["--flash-attn", "on"],
        ["--prompt-cache", "0"],
        ["--p-min", "0.2"],
        ["--chat-template-file", "t.jinja"],
    ],
)
def test_flags_of_models_loaded_here_are_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    def remote_bench(*_args: Any, **_kw: Any) -> object:
        raise AssertionError("the flag should have been refused before any request")

    monkeypatch.setattr(app.cli.bench, "RemoteBench", remote_bench)
    assert main([*SERVER, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: {flags[0]} does not go with --server (each server runs the models it loaded, "
        "as it was started) (see specchat bench --help)"
    )


@pytest.mark.parametrize("flag", ["--csv", "--plot"])
def test_output_files_the_server_bench_does_not_write_are_refused_for_what_they_are(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str
) -> None:
    assert main([*SERVER, flag, str(tmp_path / "out.png")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {flag} does not go with --server (a server bench writes its report with "
        "--json only) (see specchat bench --help)"
    )


def test_the_sampling_flags_go_with_every_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bodies: list[dict[str, Any]] = []

    def stream_reply(_server: Endpoint, body: dict[str, Any], **_kw: Any) -> StreamedReply:
        bodies.append(body)
        return StreamedReply("fine", 3, 0.1, 0.3, "length", None)

    monkeypatch.setattr(app.bench.remote, "stream_reply", stream_reply)
    monkeypatch.setattr(app.bench.remote, "served_model", lambda _server, _timeout: None)
    sampling = ["--temperature", "0.5", "--top-p", "0.9", "--top-k", "5", "--min-p", "0.05"]
    sampling += ["--repeat-penalty", "1.1", "--seed", "7"]
    assert main([*SERVER, *sampling, "--max-tokens", "3"]) == 0
    capsys.readouterr()

    expected = {
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 5,
        "min_p": 0.05,
        "repeat_penalty": 1.1,
        "seed": 7,
    }
    assert bodies  # the warm-up request and the chat prompts' turns
    for body in bodies:
        assert {name: body.get(name) for name in expected} == expected


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--timeout", "0"],
            "argument --timeout: expected a number of seconds above 0 and at most 604800, got '0'",
        ),
        (["--timeout", "nan"], "argument --timeout: expected a number of seconds above 0"),
        # A socket's timeout overflows time_t past about 3e9 s on some systems: a traceback.
        (["--timeout", "1e10"], "at most 604800, got '1e10'"),
    ],
)
def test_a_timeout_that_is_no_length_of_time_is_refused(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*SERVER, *flags])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_timeout_without_a_server_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    local = ["bench", "--target", "t.gguf", "--draft", "suffix", "--timeout", "5"]
    assert main(local) == 2
    assert capsys.readouterr().err.startswith(
        "error: --timeout goes with --server, and there is none"
    )


def test_an_unknown_builtin_class_is_a_usage_error_with_servers_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*SERVER, "--prompts", "builtin:chat,klingon"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown prompt class klingon; built-in classes are chat, code")
    assert "\n" not in err

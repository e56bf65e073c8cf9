"""`serve` and `worker` check every flag before anything loads or starts, and every command
refuses flags that contradict each other: one `error:` line with the help hint, exit status 2,
as `generate` always did."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import app.cli.serve
import app.cli.worker
from app.cli.main import build_parser, main
from app.llama.rpc_token import WorkerToken

KEY_A, KEY_B = (str(WorkerToken(bytes([n]) * 16, bytes(16))) for n in (1, 2))

SERVE_MISTAKES = [
    (["--max-tokens", "0"], "max tokens must be in 1.."),
    (["--port", "99999"], "--port must be between 0 and 65535, got 99999"),
    (["--queue-size", "0"], "--queue-size must be at least 1"),
    (["--header-timeout", "0"], "--header-timeout must be a number greater than 0"),
    (["--threads", "0"], "threads must be in 1..1024"),
    (["--n-ctx", "0"], "context size must be in"),
    (["--n-gpu-layers", "-7"], "GPU layers must be -1"),
    (["--prompt-cache", "-3"], "prompt cache must be 0 (none)"),
    (["--max-messages", "0"], "--max-messages must be a number greater than 0"),
    # `--api-key "$KEY"` with KEY unset served every request with no key at all.
    (["--api-key", ""], "--api-key is empty; leave it out to serve without a key"),
    (["--api-key", "   "], "--api-key is empty; leave it out to serve without a key"),
    (["--api-key", os.fsdecode(b"key\xff")], "--api-key is not UTF-8 text (byte 3)"),
    # A browser's Origin has no path: this one would have matched no request.
    (["--cors-origin", "http://localhost:3000/"], "--cors-origin 'http://localhost:3000/' is not"),
    (["--cors-origin", "localhost:3000"], "is not an origin: scheme://host[:port] with no path"),
]

# Flags that contradict each other, in generate and serve alike.
CONTRADICTIONS = [
    (["--draft", "suffix", "--suffix", "off"], "--suffix off needs a draft model"),
    (["--suffix", "off"], "--suffix off needs a draft model"),
    (["--no-spec", "--suffix", "off"], "--suffix off needs a draft model"),
    (["--no-spec", "--gamma", "4"], "--gamma 4 does not go with --no-spec"),
    (["--draft", "none", "--gamma", "2"], "--gamma 2 does not go with --draft none"),
    (["--draft-rpc", "plain@127.0.0.1:50052"], "--draft-rpc needs a draft model"),
    (
        [
            "--draft",
            "demo",
            "--rpc",
            f"{KEY_A}@127.0.0.1:50052",
            "--draft-rpc",
            f"{KEY_B}@127.0.0.1:50052",
        ],
        "RPC worker 127.0.0.1:50052 is given two different keys",
    ),
]


def _last_error_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]  # a plain@ worker is warned about on its own line
    assert line.startswith("error: ") and line.endswith(f"(see specchat {command} --help)")
    return line


@pytest.fixture(autouse=True)
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object) -> int:
        raise AssertionError("a refused command line must not load or start anything")

    monkeypatch.setattr(app.cli.serve, "run_serve", refuse)
    monkeypatch.setattr(app.cli.worker, "run_worker", refuse)


@pytest.mark.parametrize(("flags", "message"), SERVE_MISTAKES)
def test_serve_refuses_a_bad_flag_before_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    code = main(["serve", "--target", str(tmp_path / "t.gguf"), "--port", "0", *flags])
    assert code == 2
    assert message in _last_error_line(capsys, "serve")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--port", "0"], "--port must be 1..65535"),
        (["--threads", "0"], "--threads must be in 1..1024, got 0"),
        (["--threads", "99999"], "--threads must be in 1..1024, got 99999"),
        (["--key", "short"], "the worker key must be at least 16 characters, got 5"),
        (["--key", os.fsdecode(b"sixteen or more \xff")], "--key is not UTF-8 text (byte 16)"),
        (["--insecure-plain", "--key", "x" * 20], "--key does not go with --insecure-plain"),
        (["--insecure-plain", "--show-key"], "--show-key does not go with --insecure-plain"),
        (["--insecure-plain", "--host", "::1"], "plain RPC server listens on IPv4 addresses only"),
    ],
)
def test_worker_refuses_a_bad_flag_before_starting(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert main(["worker", *flags]) == 2
    assert message in _last_error_line(capsys, "worker")


@pytest.mark.parametrize("command", ["generate", "serve"])
@pytest.mark.parametrize(("flags", "message"), CONTRADICTIONS)
def test_contradicting_draft_flags_are_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    flags: list[str],
    message: str,
) -> None:
    prompt = ["--prompt", "hi"] if command == "generate" else []
    code = main([command, "--target", str(tmp_path / "t.gguf"), *prompt, *flags])
    assert code == 2
    assert message in _last_error_line(capsys, command)


def test_bench_refuses_suffix_off_and_draft_rpc_without_a_draft_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = ["bench", "--target", str(tmp_path / "t.gguf")]
    for flags, message in [
        (["--draft", "suffix", "--suffix", "off"], "--suffix off needs a draft model"),
        (["--draft", "ngram", "--suffix", "on,off"], "--suffix off needs a draft model"),
        (["--draft", "suffix", "--draft-rpc", "plain@127.0.0.1:50052"], "--draft-rpc needs"),
    ]:
        assert main([*target, *flags]) == 2
        assert message in _last_error_line(capsys, "bench")
    # With a draft model among the drafts, both --suffix modes are compared, as documented.
    args = build_parser().parse_args(
        [*target, "--draft", "suffix", "--draft", str(tmp_path / "d.gguf"), "--suffix", "on,off"]
    )
    args.check(args)


def test_bench_refuses_draft_none_before_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Plain decoding is the column every bench has; `none` is not a file to load.
    try:
        code = main(["bench", "--target", str(tmp_path / "t.gguf"), "--draft", "none"])
    except SystemExit as exited:  # argparse's own refusal
        code = int(str(exited.code))
    assert code == 2
    assert "--draft none: plain decoding is always measured" in _last_error_line(capsys, "bench")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--prompt", os.fsdecode(b"hi\xff")], "--prompt is not UTF-8 text (byte 2)"),
        (["--raw", "--prompt", os.fsdecode(b"\xc3(")], "--prompt is not UTF-8 text (byte 0)"),
        (
            ["--prompt", "hi", "--system", os.fsdecode(b"a\xfe")],
            "--system is not UTF-8 text (byte 1)",
        ),
    ],
)
def test_generate_refuses_command_line_text_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    # Python reads such bytes of argv as lone surrogates, which the tokenizer cannot encode:
    # that was a traceback after the model had loaded.
    code = main(["generate", "--target", str(tmp_path / "t.gguf"), *flags])
    assert code == 2
    assert (
        _last_error_line(capsys, "generate") == f"error: {message} (see specchat generate --help)"
    )


@pytest.mark.parametrize(
    ("host", "shown"),
    [
        ("0.0.0.0", "THIS-MACHINE"),
        ("::", "THIS-MACHINE"),
        ("::1", "[::1]"),
        ("10.0.0.2", "10.0.0.2"),
    ],
)
def test_the_worker_tells_clients_an_address_they_can_use(host: str, shown: str) -> None:
    # ::1 was shown as THIS-MACHINE, as if it were every address.
    assert app.cli.worker.client_address(host) == shown


@pytest.mark.parametrize(
    "command", [["worker", "--cache"], ["generate", "--prompt-file"], ["bench", "--json"]]
)
def test_an_empty_path_is_refused_not_read_as_the_current_folder(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main([*command, ""])
    assert refused.value.code == 2
    assert f"argument {command[1]}: an empty path; name a file or folder" in _last_error_line(
        capsys, command[0]
    )


def test_a_worker_keyed_once_and_named_again_without_its_key_is_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: list[object] = []
    monkeypatch.setattr(app.cli.serve, "run_serve", lambda args: checked.append(args) or 0)
    endpoint = "127.0.0.1:50052"
    flags = ["--draft", "demo", "--rpc", f"{KEY_A}@{endpoint}", "--draft-rpc", endpoint]
    assert main(["serve", "--target", "t.gguf", "--port", "0", *flags]) == 0
    assert checked

"""Abusive CLI settings are refused before anything loads, worded and exit-coded the same in
`generate` and `bench`; --help documents every flag; a signal mid-reply still prints it."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli.loading import target_config
from app.cli.main import build_parser, main
from app.engine.config import MAX_SEED
from app.engine.events import Event, TokenEvent
from app.engine.gamma import GAMMA_HELP
from app.engine.runtime import Runtime
from app.llama.config import DEFAULT_PROMPT_CACHE_MIB
from app.metrics.cost_model import MAX_GAMMA

# (flags, what the one error line must name). Each is refused with exit status 2.
SHARED_MISTAKES = [
    (["--temperature", "nan"], "temperature must be a finite number"),
    (["--temperature", "inf"], "temperature must be a finite number"),
    (["--temperature", "-1"], "temperature must be 0 (greedy) or positive"),
    (["--repeat-penalty", "nan"], "repeat penalty must be a finite number"),
    (["--repeat-penalty", "-1"], "repeat penalty must be in 0.01..100"),
    (["--repeat-penalty", "1e-300"], "repeat penalty must be in 0.01..100"),
    (["--repeat-penalty", "1e300"], "repeat penalty must be in 0.01..100"),
    (["--top-p", "nan"], "top-p must be a finite number"),
    (["--top-p", "-0.5"], "top-p must be in [0, 1]"),
    (["--min-p", "-0.1"], "min-p must be in [0, 1)"),
    (["--p-min", "nan"], "p-min must be a finite number"),
    (["--p-min", "-1"], "p-min must be in [0, 1)"),
    (["--seed", "-1"], f"seed must be in 0..{MAX_SEED}"),
    (["--seed", str(2**63)], f"seed must be in 0..{MAX_SEED}"),
    (["--n-ctx", str(2**32 + 64)], f"context size must be in {MAX_GAMMA + 1}..2147483647"),
    (["--threads", "0"], "threads must be in 1..1024"),
    (["--threads", "-4"], "threads must be in 1..1024"),
    (["--n-gpu-layers", "-2"], "GPU layers must be -1"),
    (["--prompt-cache", "-1"], f"prompt cache must be 0 (none) or a size in MiB up to {2**31 - 1}"),
    (["--max-tokens", "0"], "max tokens must be in 1..2147483647"),
    (["--gamma", "17"], f"gamma must be {GAMMA_HELP}, got '17'"),
    (["--gamma", "many"], f"gamma must be {GAMMA_HELP}, got 'many'"),
]


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exited:  # argparse refuses some values itself, with the same status
        return int(str(exited.code))


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


def _without_help_hint(line: str) -> str:
    return line.split(" (see specchat", maxsplit=1)[0]


@pytest.mark.parametrize(("flags", "message"), SHARED_MISTAKES)
def test_generate_and_bench_refuse_the_same_mistake_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    # The model paths do not exist: every refusal here happens before anything loads.
    target = ["--target", str(tmp_path / "t.gguf")]
    generate = _run(["generate", *target, "--prompt", "hi", *flags])
    generate_line = _one_error_line(capsys)
    bench = _run(["bench", *target, "--draft", "ngram", *flags])
    bench_line = _one_error_line(capsys)
    assert generate == bench == 2
    assert message in generate_line
    assert _without_help_hint(generate_line) == _without_help_hint(bench_line)
    if flags[0] == "--gamma":  # the server's γ is the same setting, refused the same way
        assert _run(["serve", *target, *flags]) == 2
        assert _without_help_hint(_one_error_line(capsys)) == _without_help_hint(generate_line)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--prompt", ""], "--prompt is empty"),
        (["--prompt", "  \n"], "--prompt is empty"),
        (["--prompt", "hi", "--raw", "--system", "Be brief."], "--system does not go with --raw"),
    ],
)
def test_generate_refuses_empty_prompts_and_a_system_message_without_chat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert _run(["generate", "--target", str(tmp_path / "t.gguf"), *flags]) == 2
    assert message in _one_error_line(capsys)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "is empty"), (b"\xff\xfe\x00", "is not UTF-8 text")],
)
def test_unusable_prompt_files_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes(content)
    code = _run(["generate", "--target", str(tmp_path / "t.gguf"), "--prompt-file", str(prompt)])
    assert code == 1
    assert message in _one_error_line(capsys)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_an_endless_prompt_file_is_refused_after_a_bounded_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(["generate", "--target", str(tmp_path / "t.gguf"), "--prompt-file", "/dev/zero"])
    assert code == 1
    assert "prompt file /dev/zero is larger than 16 MiB" in _one_error_line(capsys)


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no sub-commands")


@pytest.mark.parametrize("command", ["generate", "bench"])
def test_help_documents_every_flag_with_its_default(command: str) -> None:
    sub = _subcommands()[command]
    for action in sub._actions:
        assert action.help, f"{command} {action.option_strings} has no help"
    text = sub.format_help()
    assert "(default: 4096)" in text  # --n-ctx
    assert "(default: 0.0)" in text  # --temperature


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_reply_prints_the_partial_json_and_exits_with_its_status(
    demo_models: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: signal.Signals,
    status: int,
) -> None:
    real_generate = Runtime.generate

    def generate_then_signal(self: Runtime, *args: Any, **kwargs: Any) -> Iterator[Event]:
        tokens = 0
        for event in real_generate(self, *args, **kwargs):
            yield event
            tokens += isinstance(event, TokenEvent)
            if tokens == 3 and isinstance(event, TokenEvent):
                signal.raise_signal(signum)  # delivered to this (the main) thread, as a user would

    monkeypatch.setattr(Runtime, "generate", generate_then_signal)
    # What the handlers were before (SIG_IGN where the suite runs in the background).
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    code = main(
        [
            "generate",
            "--target",
            str(demo_models.f32),
            "--no-spec",
            "--threads",
            "1",
            "--max-tokens",
            "200",
            "--prompt",
            "Once upon a time",
            "--json",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == status
    result = json.loads(out)
    assert result["finish_reason"] == "cancelled"
    # A plain step is one token: the stop lands right after the third.
    assert len(result["token_ids"]) == 3 and result["text"]
    # The handlers are put back once the command ends.
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_reader_that_goes_away_ends_the_command_without_a_traceback(demo_models: Any) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli.main",
            "generate",
            "--target",
            str(demo_models.f32),
            "--threads",
            "1",
            "--max-tokens",
            "4",
            "--prompt",
            "Hello",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| head -c 0`: nobody reads the reply
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["--version"], ["generate", "--help"]])
def test_help_to_a_reader_that_went_away_ends_without_a_traceback(argv: list[str]) -> None:
    """`specchat --help | head -0`, in a shell without PYTHONUNBUFFERED: the text stays in the
    buffer until the flush, which must not raise past main."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "app.cli.main", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 141
    assert proc.stderr == b""


def test_the_prompt_cache_flag_sizes_the_targets_saved_states(demo_models: Any) -> None:
    parser = build_parser()
    target = ["--target", str(demo_models.q4_0)]
    assert target_config(parser.parse_args(["serve", *target])).prompt_cache_mib == (
        DEFAULT_PROMPT_CACHE_MIB
    )
    chosen = parser.parse_args(["serve", *target, "--prompt-cache", "0"])
    assert target_config(chosen).prompt_cache_mib == 0

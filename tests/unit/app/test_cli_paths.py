"""A file named on the command line is the file the user means: a relative path or a `~` that
the shell left alone (`--target=~/x.gguf`) is made absolute where the flags are read, so the
model load check's child, which runs in another folder, and the loader open the same file."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from app.cli.main import _read_prompt, build_parser
from app.errors import InvalidSettingError


def test_relative_paths_are_made_absolute_and_draft_names_stay_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    parse = build_parser().parse_args

    generate = parse(["generate", "--target", "t.gguf", "--draft", "sub/d.gguf", "--prompt", "x"])
    assert generate.target == str(tmp_path / "t.gguf")
    assert generate.draft == str(tmp_path / "sub" / "d.gguf")
    bench = parse(["bench", "--target", "t.gguf", "--draft", "d.gguf", "--draft", "demo-pruned"])
    assert bench.target == str(tmp_path / "t.gguf")
    assert bench.draft == [str(tmp_path / "d.gguf"), "demo-pruned"]
    # Names that are no file are left for the command to read as names.
    for name in ("demo", "suffix", "ngram", "none"):
        assert parse(["serve", "--target", "demo", "--draft", name]).draft == name
    assert parse(["serve", "--target", "demo"]).target == "demo"


def test_a_tilde_the_shell_left_after_an_equals_sign_is_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    parse = build_parser().parse_args

    serve = parse(["serve", "--target=~/t.gguf", "--draft=~/d.gguf"])
    assert (serve.target, serve.draft) == (str(tmp_path / "t.gguf"), str(tmp_path / "d.gguf"))
    bench = parse(
        [
            "bench",
            "--target=~/t.gguf",
            "--draft=~/d.gguf",
            "--json=~/out.json",
            "--chat-template-file=~/t.jinja",
        ]
    )
    assert bench.draft == [str(tmp_path / "d.gguf")]
    assert bench.json == tmp_path / "out.json"
    assert bench.chat_template_file == str(tmp_path / "t.jinja")
    generate = parse(["generate", "--target", "demo", "--prompt-file=~/p.txt"])
    assert generate.prompt_file == tmp_path / "p.txt"


def test_a_prompt_file_named_dash_is_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(["generate", "--target", "demo", "--prompt-file", "-"])
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("Héllo from a pipe".encode())))
    assert _read_prompt(args) == "Héllo from a pipe"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"  \n")))
    with pytest.raises(InvalidSettingError, match=r"^standard input is empty$"):
        _read_prompt(args)

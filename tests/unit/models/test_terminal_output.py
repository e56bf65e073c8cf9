"""Names from model files and servers reach the terminal as text, never as escape sequences."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from app.cli.main import main
from models.cli import _ProgressPrinter
from models.hub import DownloadProgress
from models.terminal import printable
from tests.helpers.hostile_gguf import build_corpus
from tests.helpers.model_files import bundled_q4_1, write_tiny_gguf

RAW_CONTROLS = ("\x1b", "\x07", "\r", "\x00", "\u202e")


def test_printable_shows_control_characters_as_escapes() -> None:
    assert printable("plain name – ok") == "plain name – ok"
    assert printable("\x1b]0;title\x07") == "\\x1b]0;title\\x07"
    assert printable("a\nb\rc\x00") == "a\\x0ab\\x0dc\\x00"
    assert printable("rtl\u202eevil") == "rtl\\u202eevil"
    assert printable("bad \udcff byte") == "bad \\udcff byte"  # surrogate-escaped file name byte
    assert printable(Path("/tmp/x")) == "/tmp/x"


@pytest.fixture(scope="module")
def escape_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("esc")
    cases = build_corpus(bundled_q4_1(), folder / "corpus")
    source = next(c.path for c in cases if c.name == "escape-codes-in-name")
    target = folder / "models" / "evil\x1b[2J\x1b]0;t\x07.gguf"  # a hostile file name too
    target.parent.mkdir()
    shutil.copyfile(source, target)
    return target


def _no_raw_controls(text: str) -> None:
    for ch in RAW_CONTROLS:
        assert ch not in text, repr(ch)


def test_models_list_prints_hostile_names_escaped(
    escape_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "list", "--dir", str(escape_model.parent)]) == 0
    out, err = capsys.readouterr()
    _no_raw_controls(out + err)
    assert "evil\\x1b[2J\\x1b]0;t\\x07.gguf" in out  # the path, shown as text
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x0dfake line\\x0asecond"[:31] in out  # general.name


def test_models_inspect_prints_hostile_names_escaped(
    escape_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "inspect", str(escape_model)]) == 0
    out, err = capsys.readouterr()
    _no_raw_controls(out + err)
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x0dfake line\\x0asecond" in out
    assert not any(line.startswith(("second", "fake")) for line in out.splitlines())
    assert "usable:" in out and "usable:  no" not in out


def test_models_list_shows_why_a_readable_file_is_not_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tiny_gguf(tmp_path / "lora.gguf", general_type="adapter")
    assert main(["models", "list", "--dir", str(tmp_path)]) == 0
    out, _err = capsys.readouterr()
    assert "lora.gguf: not a language model (adapter file)" in out


def test_models_list_of_a_missing_folder_is_an_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent"
    assert main(["models", "list", "--dir", str(missing)]) == 2  # a usage error
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"error: --dir {missing}: no such folder (see specchat models list --help)\n"
    a_file = write_tiny_gguf(tmp_path / "file.gguf")
    assert main(["models", "list", "--dir", str(a_file)]) == 2
    assert capsys.readouterr().err == (
        f"error: --dir {a_file}: a file, not a folder (see specchat models list --help)\n"
    )


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pull_that_fails_mid_file_ends_its_progress_line_before_the_error() -> None:
    terminal = _Terminal()
    printer = _ProgressPrinter(terminal)
    printer(DownloadProgress("m.gguf", 1024, 4096, "downloading"))
    assert not terminal.getvalue().endswith("\n")  # redrawn in place while it runs
    printer.end_line()
    assert terminal.getvalue().endswith("25%\n")
    printer.end_line()  # a line already ended is not ended twice
    printer(DownloadProgress("m.gguf", 4096, 4096, "done"))
    printer.end_line()
    assert terminal.getvalue().count("\n") == 2

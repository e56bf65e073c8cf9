"""`bench --json/--csv/--plot`: a path that cannot be written is refused with the flags, before
any measuring (exit status 2); a disk that refuses the file at the end is one error line
(exit status 1), as is a table printed to a full disk. Never a traceback."""

from __future__ import annotations

import io
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

import app.cli.bench
from app.cli.main import main
from app.cli.signals import Interrupted
from app.llama.config import ModelConfig
from tests.helpers.bench_data import seed_report
from tests.helpers.refusals import error_line

DEV_FULL = Path("/dev/full")


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The benchmark faked: what it was asked to measure, answered with a worked report."""
    runs: list[str] = []

    def run_benchmark(target: ModelConfig, *_args: Any, **_kw: Any) -> object:
        runs.append(target.path)
        return seed_report()

    monkeypatch.setattr(app.cli.bench, "run_benchmark", run_benchmark)
    monkeypatch.setattr(app.cli.bench, "target_config", lambda args: ModelConfig(args.target))
    return runs


def _bench(tmp_path: Path, *flags: str) -> int:
    target, draft = str(tmp_path / "t.gguf"), str(tmp_path / "d.gguf")
    quick = ["--prompts", "builtin:chat", "--quiet", "--no-warmup"]
    return main(["bench", "--target", target, "--draft", draft, *quick, *flags])


@pytest.mark.parametrize(
    "case",
    [
        ("--json", ".", "is a folder; name a file to write"),
        ("--csv", "folder", "is a folder; name a file to write"),
        ("--plot", "folder", "is a folder; name a file to write"),
        ("--plot", "chart.txt", "end the file name in a chart format: "),
        ("--plot", "chart", "end the file name in a chart format: "),
        ("--json", "a-file/out.json", "a-file is not a folder"),
        ("--csv", "no-folder/out.csv", "no-folder does not exist"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_measuring(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    measured: list[str],
    case: tuple[str, str, str],
) -> None:
    flag, name, message = case
    (tmp_path / "folder").mkdir()
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    assert _bench(tmp_path, flag, str(tmp_path / name)) == 2
    line = error_line(capsys)
    assert line.startswith(f"error: {flag}") and message in line
    assert line.endswith("(see specchat bench --help)")
    assert measured == []
    assert not (tmp_path / "folder.png").exists()  # no chart beside a folder named for it


@pytest.mark.skipif(not DEV_FULL.exists(), reason="no /dev/full here")
def test_a_report_file_the_disk_refuses_is_oneerror_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], measured: list[str]
) -> None:
    assert _bench(tmp_path, "--json", str(DEV_FULL)) == 1
    assert measured == [str(tmp_path / "t.gguf")]
    assert error_line(capsys) == (
        f"error: --json: cannot write {DEV_FULL}: No space left on device"
    )


@pytest.mark.skipif(not DEV_FULL.exists(), reason="no /dev/full here")
def test_a_table_printed_to_a_full_disk_is_oneerror_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    measured: list[str],
) -> None:
    with DEV_FULL.open("w", encoding="utf-8") as full:
        monkeypatch.setattr(sys, "stdout", full)  # here: capsys sets its own when the test starts
        code = _bench(tmp_path)
    assert code == 1
    assert error_line(capsys) == "error: cannot write output: No space left on device"


class _ClosedPipe(io.StringIO):
    """stdout whose reader went away (`specchat bench ... | true`)."""

    def write(self, _text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_the_files_are_written_even_when_the_reader_of_stdout_went_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, measured: list[str]
) -> None:
    out = {ext: tmp_path / f"bench.{ext}" for ext in ("json", "csv", "png")}
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    code = _bench(
        tmp_path, "--json", str(out["json"]), "--csv", str(out["csv"]), "--plot", str(out["png"])
    )
    assert code == 141
    assert json.loads(out["json"].read_text(encoding="utf-8"))["configs"]
    assert out["csv"].read_text(encoding="utf-8").startswith("label,")
    assert out["png"].stat().st_size > 0


def _cut_short(path: Path, text: str) -> None:
    """Half the file, then a second signal: what a write that SIGINT ends at once leaves."""
    with path.open("w", encoding="utf-8") as handle:
        handle.write(text[: len(text) // 2])
    raise Interrupted(signal.SIGINT)


@pytest.mark.parametrize("flag", ["--json", "--csv", "--plot"])
def test_a_report_file_cut_short_never_replaces_the_one_that_was_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, measured: list[str], flag: str
) -> None:
    out = tmp_path / "reports" / f"bench.{flag[2:].replace('plot', 'png')}"
    out.parent.mkdir()
    out.write_text("the report of an earlier run", encoding="utf-8")
    monkeypatch.setattr(Path, "write_text", lambda path, text, **_kw: _cut_short(path, text))
    monkeypatch.setattr(
        app.cli.bench, "save_plot", lambda _report, path, *_a: _cut_short(path, "x" * 100)
    )

    assert _bench(tmp_path, flag, str(out)) == 128 + signal.SIGINT

    assert out.read_text(encoding="utf-8") == "the report of an earlier run"
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no half file left beside it


def test_a_report_file_is_written_whole_over_the_one_that_was_there(
    tmp_path: Path, measured: list[str]
) -> None:
    out = {ext: tmp_path / "reports" / f"bench.{ext}" for ext in ("json", "csv", "png")}
    out["json"].parent.mkdir()
    for path in out.values():
        path.write_text("the report of an earlier run", encoding="utf-8")
    files = ["--json", str(out["json"]), "--csv", str(out["csv"]), "--plot", str(out["png"])]
    assert _bench(tmp_path, *files) == 0
    assert json.loads(out["json"].read_text(encoding="utf-8"))["configs"]
    assert out["csv"].read_text(encoding="utf-8").startswith("label,")
    assert out["png"].read_bytes().startswith(b"\x89PNG")
    assert sorted(p.name for p in out["json"].parent.iterdir()) == sorted(
        p.name for p in out.values()
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--json", "out", "--csv", "out"], "--csv {out} is the same file as --json"),
        (
            ["--json", "chart.png", "--plot", "chart.png"],
            "--plot {chart} is the same file as --json",
        ),
        (["--json", "prompts.txt"], "--json {prompts} is the same file as --prompts"),
        (["--csv", "t.gguf"], "--csv {target} is the same file as --target"),
        # A hard link is one file under two names.
        (["--json", "alias.txt"], "--json {alias} is the same file as --prompts"),
    ],
)
def test_outputs_that_name_one_file_are_refused_before_measuring(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    measured: list[str],
    flags: list[str],
    message: str,
) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Name a fruit.", encoding="utf-8")
    (tmp_path / "t.gguf").write_bytes(b"GGUF")
    (tmp_path / "alias.txt").hardlink_to(prompts)
    names = {"out": "out", "chart": "chart.png", "prompts": "prompts.txt", "target": "t.gguf"}
    names["alias"] = "alias.txt"
    paths = [str(tmp_path / f) if not f.startswith("--") else f for f in flags]
    target = str(tmp_path / "t.gguf")
    code = main(
        ["bench", "--target", target, "--draft", "suffix", "--prompts", str(prompts), *paths]
    )
    assert code == 2
    expected = message.format(**{k: tmp_path / v for k, v in names.items()})
    line = error_line(capsys)
    assert expected in line, line
    assert measured == []
    assert prompts.read_text(encoding="utf-8") == "Name a fruit."

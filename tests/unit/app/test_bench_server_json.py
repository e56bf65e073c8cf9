"""`--json` of the server-overhead bench (scripts/bench-server) and of `specchat bench --server`:
a path that cannot be written is refused before any model loads or server is asked, and a disk
that refuses the report at the end is one error line; never a traceback."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import app.cli.bench
import app.cli.bench_server
from app.cli.main import main
from tests.helpers.refusals import error_line

REPORT = {"server_over_generate": 0.97, "rows": []}


def test_a_json_path_under_a_file_is_refused_before_the_bench(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def run(_args: Any) -> dict[str, Any]:
        raise AssertionError("the path should have been refused before the bench")

    monkeypatch.setattr(app.cli.bench_server, "run", run)
    (tmp_path / "file.txt").write_text("not a folder\n")
    out = tmp_path / "file.txt" / "x.json"
    # A setting the user can mend: exit 2, as `specchat bench` answers it.
    assert app.cli.bench_server.main(["--target", "demo", "--json", str(out)]) == 2
    assert error_line(capsys) == f"error: --json: {out.parent} is not a folder"


def test_a_disk_that_refuses_the_report_is_oneerror_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(app.cli.bench_server, "run", lambda _args: REPORT)
    assert app.cli.bench_server.main(["--target", "demo", "--json", "/dev/full"]) == 1
    assert error_line(capsys).startswith("error: --json: cannot write /dev/full: ")


def test_the_report_is_written_whole_and_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(app.cli.bench_server, "run", lambda _args: REPORT)
    out = tmp_path / "report.json"
    out.write_text("an earlier report\n")
    assert app.cli.bench_server.main(["--target", "demo", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.read_text() == printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_server_bench_refuses_a_json_path_under_a_file_before_any_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def remote_bench(*_args: Any, **_kw: Any) -> object:
        raise AssertionError("the path should have been refused before any request")

    monkeypatch.setattr(app.cli.bench, "RemoteBench", remote_bench)
    (tmp_path / "file.txt").write_text("not a folder\n")
    out = tmp_path / "file.txt" / "x.json"
    argv = ["bench", "--server", "http://127.0.0.1:9", "--quiet", "--json", str(out)]
    assert main(argv) == 2
    assert error_line(capsys).startswith(f"error: --json: {out.parent} is not a folder")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_report_printed_to_a_full_disk_is_oneerror_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(app.cli.bench_server, "run", lambda _args: REPORT)
    with Path("/dev/full").open("w", encoding="utf-8") as full:
        monkeypatch.setattr(sys, "stdout", full)  # capsys set its own when the test started
        code = app.cli.bench_server.main(["--target", "demo"])
    assert code == 1
    assert error_line(capsys) == "error: cannot write output: No space left on device"


def test_the_server_log_folder_is_a_scratch_folder_a_later_run_can_clean(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A TemporaryDirectory stays behind when the bench is killed outright; a scratch folder is
    # named by this process, so the next run removes it once this process has ended.
    folders: list[Path] = []

    class Runtime:
        def close(self) -> None:
            pass

    class Server:
        def __init__(self, _args: Any, folder: Path) -> None:
            folders.append(folder)

        def __enter__(self) -> Server:
            return self

        def __exit__(self, *_exc: object) -> None:
            pass

        def complete(self, _prompt: object) -> tuple[int, float]:
            return 4, 0.1

    module = app.cli.bench_server
    monkeypatch.setattr(module, "load_runtime", lambda _args, _draft: Runtime())
    monkeypatch.setattr(module, "_in_process", lambda *_args: (4, 0.1))
    monkeypatch.setattr(module, "_Server", Server)
    monkeypatch.setattr(module, "resolve_model_path", lambda value, **_role: value)
    args = module.build_parser().parse_args(
        ["--target", "demo", "--draft", "suffix", "--prompts", "builtin:chat", "--repeat", "1"]
    )
    module.run(args)
    assert len(folders) == 1
    assert re.fullmatch(rf"specchat-[a-z]+-{os.getpid()}-\w+", folders[0].name), folders[0]
    assert not folders[0].exists()


@pytest.mark.parametrize(
    ("repeat", "shown"), [("0", "0"), ("-3", "-3"), ("99999999999", "99999999999")]
)
def test_a_repeat_count_out_of_range_is_refused_before_anything_loads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repeat: str, shown: str
) -> None:
    # --repeat 0 divided by zero at the end; a huge one ran until something gave.
    def load_runtime(*_args: Any) -> object:
        raise AssertionError("the count should have been refused before any model loads")

    monkeypatch.setattr(app.cli.bench_server, "load_runtime", load_runtime)
    assert app.cli.bench_server.main(["--target", "demo", "--repeat", repeat]) == 2
    assert error_line(capsys) == f"error: --repeat must be in 1..1000, got {shown}"

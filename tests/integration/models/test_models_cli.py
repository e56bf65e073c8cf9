"""`specchat models ...` end to end: inspect, list, make-draft, catalog."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.errors import NO_SUCH_FILE, NOT_GGUF
from app.paths import models_dir
from models.catalog import CATALOG
from models.compat import check_compatibility
from models.demo import demo_file_name
from models.gguf import inspect_gguf
from tests.helpers.model_files import bundled_q4_1, write_broken_files, write_tiny_gguf

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_inspect_bad_path_prints_one_error_line_and_fails(tmp_path: Path) -> None:
    broken = write_broken_files(tmp_path)
    for path, reason in [
        (tmp_path / "missing.gguf", NO_SUCH_FILE),
        (broken["random.gguf"][0], NOT_GGUF),
    ]:
        result = subprocess.run(
            [sys.executable, "-m", "app.cli.main", "models", "inspect", str(path)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 1
        assert result.stdout == ""
        assert result.stderr == f"error: cannot load model {path}: {reason}\n"


def test_inspect_json_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf", chat_template="{{ x }}")
    assert main(["models", "inspect", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["quantization"] == "F32" and data["vocab_size"] == 64
    assert data["chat_template"] == "{{ x }}" and "tokens" not in data
    assert main(["models", "inspect", str(path)]) == 0
    table = capsys.readouterr().out
    assert "quantization:" in table and "F32" in table and "64 tokens" in table


def test_list_shows_broken_files_with_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hf-cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no LM Studio folders here
    write_tiny_gguf(models_dir() / "good.gguf")
    extra = tmp_path / "extra"
    broken = write_broken_files(extra)
    assert main(["models", "list", "--dir", str(extra)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["NAME", "ARCH", "QUANT"]
    assert "tiny test model" in out
    for name, (path, word) in broken.items():
        line = next(line for line in out.splitlines() if str(path) in line)
        assert word in line, name
    assert f"{1 + len(broken)} files, {len(broken)} unusable" in out

    assert main(["models", "list", "--dir", str(extra), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["ok"] for d in data].count(True) == 1
    assert {Path(d["path"]).name for d in data if not d["ok"]} == set(broken)


def test_list_shows_the_bundled_demo_draft_with_the_demo_family(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hf-cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    write_tiny_gguf(models_dir() / "demo" / demo_file_name("F32"))
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if str(bundled_q4_1()) in line)
    assert "Q4_1" in line.split() and "bundled (ro)" in line
    assert "\n2 files\n" in out


@pytest.mark.model
def test_make_draft_is_loadable_and_compatible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import llama_cpp

    target = bundled_q4_1()
    out = tmp_path / "draft.Q4_0.gguf"
    assert main(["models", "make-draft", str(target), "--type", "q4_0", "--out", str(out)]) == 0
    stdout, stderr = capsys.readouterr()
    assert stdout.strip() == str(out)
    assert "compatible with" in stderr
    info = inspect_gguf(out)
    assert info.quantization == "Q4_0"
    assert check_compatibility(inspect_gguf(target), info).compatible
    model = llama_cpp.Llama(str(out), n_ctx=64, verbose=False)
    try:
        assert model.n_vocab() == 49152
        assert len(model.tokenize(b"Hello there")) > 0
    finally:
        model.close()
    # An existing output is not replaced without --force: a usage error, before quantizing.
    assert main(["models", "make-draft", str(target), "--type", "Q4_0", "--out", str(out)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err


def test_make_draft_of_a_file_that_is_no_model_is_refused_before_quantizing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = write_tiny_gguf(tmp_path / "vocab.gguf", weights=False)
    out = tmp_path / "out.gguf"
    assert main(["models", "make-draft", str(target), "--type", "Q8_0", "--out", str(out)]) == 1
    _out, err = capsys.readouterr()
    assert "quantizing" not in err
    assert err == f"error: cannot load model {target}: no weights (a vocabulary-only file)\n"
    assert not out.exists()


def test_a_draft_that_fails_its_own_check_is_not_left_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import models.compat

    refused = models.compat.Compatibility(compatible=False, reason="the vocabularies differ")
    monkeypatch.setattr(models.compat, "check_compatibility", lambda *_args: refused)
    out = tmp_path / "draft.Q8_0.gguf"
    command = ["models", "make-draft", str(bundled_q4_1()), "--type", "Q8_0", "--out", str(out)]
    assert main(command) == 1
    assert "the vocabularies differ" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_inspect_and_list_say_when_llama_cpp_could_not_load_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from models.probe import _save_check, file_identity

    path = write_tiny_gguf(tmp_path / "m.gguf")
    assert main(["models", "inspect", str(path)]) == 0
    assert "usable:" in (before := capsys.readouterr().out) and "yes" in before.split("usable:")[1]
    _save_check(file_identity(path), False, reason := "check_tensor_dims: tensor 'x' not found")
    assert main(["models", "inspect", str(path)]) == 0
    usable = capsys.readouterr().out.split("usable:")[1].strip()
    assert usable == f"no, llama.cpp could not load it: {reason}"
    assert main(["models", "list", "--dir", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "llama.cpp could not load it" in listed and "1 unusable" in listed


@pytest.mark.model
def test_make_draft_default_path_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "make-draft", str(bundled_q4_1()), "--type", "Q2_K", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["path"] == str(models_dir() / "SmolLM2-135M-Instruct.Q2_K.gguf")
    assert data["compatible"] is True and data["size_ratio"] < 1


def test_make_draft_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = write_tiny_gguf(tmp_path / "t.gguf")
    assert main(["models", "make-draft", str(target), "--type", "Q9_9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown quantization type 'Q9_9'") and err.count("\n") == 1
    # A folder where the file should go is refused before quantizing, not renamed onto at the
    # end (a traceback), even with --force.
    folder = tmp_path / "out.gguf"
    folder.mkdir()
    command = ["models", "make-draft", str(target), "--type", "Q4_0", "--out", str(folder)]
    assert main([*command, "--force"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {folder} is a folder") and err.count("\n") == 1
    assert folder.is_dir() and not any(folder.iterdir())
    assert main(["models", "make-draft", str(tmp_path / "nope.gguf"), "--type", "Q4_0"]) == 1
    assert capsys.readouterr().err.endswith(f"{NO_SUCH_FILE}\n")


def test_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "catalog", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data) == len(CATALOG) >= 3
    assert all(item["verified_offline"] is False for item in data)
    repos = {item["target"]["repo"] for item in data}
    assert "Qwen/Qwen2.5-7B-Instruct-GGUF" in repos
    assert main(["models", "catalog"]) == 0
    assert "specchat models pull Qwen/Qwen2.5-0.5B-Instruct-GGUF" in capsys.readouterr().out


def test_models_without_subcommand_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 2
    assert "make-draft" in capsys.readouterr().err

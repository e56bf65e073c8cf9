"""`specchat bench` with a --draft that cannot be loaded: the other drafts are still measured,
the report says which draft failed and why, and the command exits 1 naming it; with no draft
that loads, a one-line error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main

THREADS = 1


def _bench_cli(demo_models: Any, tmp_path: Path, drafts: list[Path]) -> tuple[int, Path]:
    out = tmp_path / "bench.json"
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Name a fruit.", encoding="utf-8")
    args = ["bench", "--target", str(demo_models.q8_0)]
    for draft in drafts:
        args += ["--draft", str(draft)]
    args += ["--gamma", "2", "--prompts", str(prompts), "--max-tokens", "4", "--n-ctx", "512"]
    args += ["--threads", str(THREADS), "--no-warmup", "--quiet", "--json", str(out)]
    return main(args), out


def test_cli_measures_the_other_drafts_when_one_cannot_be_loaded(
    demo_models: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One broken --draft among several no longer ends the bench: the JSON and the table say
    which draft failed and why, every other draft is measured (as Compare does), and the exit
    status and one stderr line say the run is not complete."""
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model at all")
    code, out = _bench_cli(demo_models, tmp_path, [broken, demo_models.q4_1])
    assert code == 1  # written all the same, but a script must not read it as complete
    data = json.loads(out.read_text(encoding="utf-8"))
    by_label = {c["label"]: c for c in data["configs"]}
    failed = by_label["broken γ=2"]
    assert failed["runs"] == 0 and "broken.gguf" in failed["error"]
    measured = by_label[f"{demo_models.q4_1.stem} γ=2"]
    assert measured["runs"] == 1 and measured["error"] is None
    assert {run["config"] for run in data["runs"]} == {"plain", measured["label"]}
    written = capsys.readouterr()
    assert f"broken: not measured: {failed['error']}" in written.out
    assert written.err.strip() == f"error: broken: not measured: {failed['error']}"


def test_cli_with_no_draft_that_loads_is_a_one_line_error(
    demo_models: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model at all")
    code, out = _bench_cli(demo_models, tmp_path, [broken])
    assert code == 1 and not out.exists()
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "broken.gguf" in err and "\n" not in err

"""`specchat bench` stopped by SIGINT or SIGTERM keeps what it measured: the runs completed
before the signal are printed and written (--json, --csv, --plot), marked interrupted, and the
command exits 128 + the signal's number with one line on stderr."""

from __future__ import annotations

import csv
import io
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from tests.helpers.bench_signals import signal_at_progress

THREADS = 1
# Plain and one configuration: blocks of two runs, one per prompt and repeat.
SIGNAL_BEFORE_RUN = 3


def _bench(demo_models: Any, tmp_path: Path, *flags: str) -> int:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Name a fruit.\n---\nName a colour.\n", encoding="utf-8")
    return main(
        [
            "bench",
            "--target",
            str(demo_models.f32),
            "--draft",
            "ngram",
            "--gamma",
            "2",
            "--prompts",
            str(prompts),
            "--repeat",
            "2",
            "--max-tokens",
            "8",
            "--n-ctx",
            "512",
            "--threads",
            str(THREADS),
            "--no-warmup",
            *flags,
        ]
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_keeps_the_runs_measured_before_it(
    demo_models: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    signum: int,
) -> None:
    signal_at_progress(monkeypatch, SIGNAL_BEFORE_RUN, signum)
    out = {ext: tmp_path / f"bench.{ext}" for ext in ("json", "csv", "png")}
    files = ["--json", str(out["json"]), "--csv", str(out["csv"]), "--plot", str(out["png"])]

    code = _bench(demo_models, tmp_path, *files)

    assert code == 128 + signum
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "error: interrupted; the 3 runs completed before it are reported"
    ]
    assert "plain" in captured.out and "interrupted: the figures cover the 2 runs" in captured.out
    data = json.loads(out["json"].read_text(encoding="utf-8"))
    assert data["interrupted"] is True
    # The block the signal cut short is listed but counted in no figure.
    assert [(r["config"], r["counted"]) for r in data["runs"]] == [
        ("plain", True),
        ("suffix γ=2", True),
        ("plain", False),
    ]
    assert data["plain"]["runs"] == 1 and data["configs"][0]["runs"] == 1
    rows = list(csv.DictReader(io.StringIO(out["csv"].read_text(encoding="utf-8"))))
    assert {row["label"] for row in rows} == {"plain", "suffix γ=2"}
    assert out["png"].stat().st_size > 0


def test_a_bench_that_runs_to_its_end_is_not_marked_interrupted(
    demo_models: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    assert _bench(demo_models, tmp_path, "--quiet", "--json", str(out)) == 0
    capsys.readouterr()
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["interrupted"] is False
    assert len(data["runs"]) == 8 and all(r["counted"] for r in data["runs"])


def test_a_signal_before_any_run_completed_leaves_earlier_files_as_they_were(
    demo_models: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    signal_at_progress(monkeypatch, 0, signal.SIGINT)
    out = {ext: tmp_path / f"bench.{ext}" for ext in ("json", "csv")}
    for path in out.values():
        path.write_text("an earlier run's report\n", encoding="utf-8")

    code = _bench(demo_models, tmp_path, "--json", str(out["json"]), "--csv", str(out["csv"]))

    assert code == 128 + signal.SIGINT
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "error: interrupted; no run had completed, so nothing is reported or written"
    ]
    assert captured.out == ""
    assert all(p.read_text(encoding="utf-8") == "an earlier run's report\n" for p in out.values())

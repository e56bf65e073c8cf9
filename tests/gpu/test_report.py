"""The check's report: valid JSON and Markdown tables from a run's results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scripts.gpucheck.report import JSON_NAME, MD_NAME, render_markdown, write_report


def _run(exact: bool, gamma: int | None, identical: bool) -> dict[str, Any]:
    return {
        "prompt": 0,
        "exact": exact,
        "gamma": gamma,
        "tokens": 64,
        "tokens_per_second": 150.0,
        "acceptance_rate": None if gamma is None else 0.9,
        "tokens_per_round": 3.5,
        "identical_to_plain": identical,
        "first_mismatch": None if identical else 17,
    }


def _report() -> dict[str, Any]:
    vram = {"nvml_used_bytes": 20 * 1024**3, "nvidia_smi_used_bytes": 20 * 1024**3}
    pair = {
        "target": "/m/8b-f16.gguf",
        "draft": "/m/8b-q8_0.gguf",
        "load_s": 9.5,
        "vram_before": {"nvml_used_bytes": 1024**3},
        "vram_loaded": vram,
        "model_memory": {"total": 18 * 1024**3},
        "load_log": ["offloaded 33/33 layers to GPU", "CUDA0 model buffer size = 15317 MiB"],
        "pass_sizes": {
            "exact": [
                {
                    "rows_per_pass": 17,
                    "positions": 34,
                    "bit_equal": 30,
                    "same_argmax": 34,
                    "max_abs_diff": 0.0123,
                }
            ],
        },
        "runs": [_run(False, None, True), _run(False, 16, False), _run(True, 16, True)],
    }
    config = {
        "label": "8b-q8_0 γ=4",
        "tokens_per_second": 300.0,
        "speedup": 1.9,
        "predicted_speedup": 2.1,
        "acceptance_rate": 0.95,
        "mean_gamma": 4.0,
        "identical_to_plain": True,
    }
    return {
        "started": "2026-11-30T21:00:00+00:00",
        "mode": "gpu",
        "machine": {"gpu": "H200"},
        "steps": [
            {"name": "build", "status": "ok", "seconds": 300.0, "note": "a|b"},
            {"name": "bench 8b", "status": "skipped", "note": "needs ~100 s"},
        ],
        "identity": {"8b": {"gpu_offload_supported": True, "pairs": [pair]}},
        "bench": {
            "8b": {"plain": {"label": "plain", "tokens_per_second": 150.0}, "configs": [config]}
        },
        "tools": {"llama-bench 8b": "| model | t/s |"},
    }


def test_write_report_writes_json_that_reads_back(tmp_path: Path) -> None:
    report = _report()
    json_path, md_path = write_report(tmp_path / "out", report)
    assert json_path.name == JSON_NAME and md_path.name == MD_NAME
    assert json.loads(json_path.read_text(encoding="utf-8")) == report
    assert not list((tmp_path / "out").glob("*.partial"))


def test_markdown_has_a_row_per_step_run_and_config() -> None:
    md = render_markdown(_report())
    assert "| build | ok | 300 | a/b |" in md  # a pipe in a note must not split the row
    assert "| bench 8b | skipped | — | needs ~100 s |" in md
    assert "| 0 | NO | 16 | 64 | 150.0 | 0.90 | 3.50 | NO |" in md
    assert "| 0 | yes | 16 | 64 | 150.0 | 0.90 | 3.50 | yes |" in md
    assert "| 8b-q8_0 γ=4 | 300.0 | 1.90 | 2.10 | 0.95 | 4.00 | yes |" in md
    assert "VRAM read by SpecChat (NVML) 20.00 GiB vs nvidia-smi 20.00 GiB" in md
    assert "grew by 19.00 GiB" in md
    assert "| gpu | H200 |" in md
    assert "offloaded 33/33 layers to GPU; CUDA0 model buffer size = 15317 MiB" in md


def test_summary_counts_identity_per_mode_and_names_the_best_config() -> None:
    md = render_markdown(_report())
    summary = md.split("## Summary", 1)[1].split("## Steps", 1)[0]
    assert "default mode 1/2, exact mode 1/1" in summary
    assert "exact-mode logits bit-equal across pass sizes 30/34" in summary
    assert "| exact | 17 | 30/34 | 34/34 | 0.0123 |" in md
    assert "VRAM NVML vs nvidia-smi: 20.00 GiB vs 20.00 GiB" in summary
    assert "plain 150.0 tok/s; best 8b-q8_0 γ=4 300.0 tok/s, speedup 1.90 (predicted 2.10)" in (
        summary
    )


def test_an_empty_report_still_renders() -> None:
    md = render_markdown({"started": "now", "mode": "gpu", "steps": []})
    assert md.startswith("# GPU check, now")

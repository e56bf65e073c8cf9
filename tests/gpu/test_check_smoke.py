"""scripts/gpu-check end to end on a CPU (`--cpu-smoke`): every step with tiny models and the
installed llama-cpp-python, against a stand-in bundle, so the script is exercised where there
is no GPU. Its report must be complete and say what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.model


def _check(tmp_path: Path, bundle: Path, *extra: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "scripts.gpucheck.check",
        "--cpu-smoke",
        "--out",
        str(out),
        "--work",
        str(tmp_path / "work"),
        "--bundle",
        str(bundle),
        *extra,
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    report = json.loads((out / "gpu-check.json").read_text(encoding="utf-8"))
    return done.returncode, report, (out / "gpu-check.md").read_text(encoding="utf-8")


def test_cpu_smoke_runs_every_step(tmp_path: Path, stand_in_bundle: Path) -> None:
    rc, report, md = _check(
        tmp_path,
        stand_in_bundle,
        "--max-tokens",
        "16",
        "--gammas",
        "1,4,16",
        "--bench-gammas",
        "4,auto",
    )
    steps = {s["name"]: s for s in report["steps"]}
    assert rc == 0, report["steps"]
    expected = [
        "machine",
        "install wheels",
        "build llama-cpp-python",
        "import the build",
        "write models tiny",
        "identity tiny",
        "bench tiny",
        "llama.cpp tools tiny",
    ]
    assert list(steps) == expected
    assert all(s["status"] == "ok" for s in steps.values())
    assert report["failed_steps"] == []
    pairs = report["identity"]["tiny"]["pairs"]
    assert [Path(p["draft"]).name for p in pairs] == ["tiny-q8_0.gguf", "tiny-draft-f16.gguf"]
    # llama.cpp's own account of where each buffer went is kept (CPU here, CUDA0 on a GPU).
    assert all(any("buffer size" in line for line in p["load_log"]) for p in pairs)
    runs = [r for p in pairs for r in p["runs"]]
    # 2 prompts x 2 modes x (plain + 3 γ) per pair; exact mode matches plain by construction.
    assert len(runs) == 2 * 2 * 2 * 4
    assert all(r["identical_to_plain"] for r in runs if r["exact"])
    # The engine's own check agrees with the probe below: these models' passes round alike.
    assert not any(r["exact_check_warned"] for r in runs)
    # The first pair also compares logits by pass size; exact mode makes them bit-equal.
    probe = pairs[0]["pass_sizes"]
    assert [r["rows_per_pass"] for r in probe["exact"]] == [3, 5, 9, 17]
    assert all(r["bit_equal"] == r["positions"] == 34 for r in probe["exact"])
    assert pairs[1]["pass_sizes"] is None
    copy_g4 = [r for r in pairs[0]["runs"] if r["gamma"] == 4]
    assert sum(r["acceptance_rate"] for r in copy_g4) / len(copy_g4) > 0.5
    bench = report["bench"]["tiny"]
    labels = [c["label"] for c in bench["configs"]]
    assert len(labels) == 4
    # A γ set by hand drafts as set, and every configuration that drafted is priced. γ auto may
    # keep a draft out of every round once γ 4 has measured it slower than plain (on one CPU
    # thread a tiny draft's pass costs about the tiny target's), leaving nothing to price.
    for config in bench["configs"]:
        assert config["drafted"] or config["gamma"] == "auto", config["label"]
        if config["drafted"]:
            assert config["predicted_speedup"], config["label"]
    assert "## specchat bench: tiny" in md and "## Identity, acceptance and VRAM: tiny" in md


def test_a_short_budget_skips_steps_and_still_reports(
    tmp_path: Path, stand_in_bundle: Path
) -> None:
    rc, report, md = _check(tmp_path, stand_in_bundle, "--budget-s", "60", "--no-tools")
    steps = {s["name"]: s for s in report["steps"]}
    assert rc == 0
    assert steps["identity tiny"]["status"] == "skipped"
    assert "s left" in steps["identity tiny"]["note"]
    assert "| identity tiny | skipped |" in md


def test_an_empty_bundle_fails_with_a_report(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, report, _ = _check(tmp_path, empty)
    assert rc == 1
    assert report["steps"][-1]["name"] == "install wheels"
    assert "gpu-prepare" in report["steps"][-1]["note"]


def test_an_unknown_size_is_one_error_line(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "scripts.gpucheck.check", "--sizes", "70b", "--out", str(tmp_path)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("error: unknown size '70b'")
    assert done.stderr.count("\n") == 1


def test_a_step_out_of_time_stops_what_it_started(tmp_path: Path) -> None:
    import argparse
    import time

    from scripts.gpucheck.check import Check

    args = argparse.Namespace(budget_s=600, work=tmp_path / "w", out=tmp_path / "o", cpu_smoke=True)
    check = Check(args)
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 60 >/dev/null 2>&1 & echo $! > {pid_file}; echo started; wait"
    with pytest.raises(RuntimeError, match="ran out of time"):
        check.run(["sh", "-c", script], timeout=2, log="step.log")
    assert (tmp_path / "o" / "step.log").read_text(encoding="utf-8") == "started\n"
    grandchild = int(pid_file.read_text(encoding="utf-8"))
    time.sleep(0.2)
    status = Path(f"/proc/{grandchild}/status")
    # Gone, or dead and waiting for init to reap it ("Z"): either way no longer running.
    if status.exists():
        state = next(ln for ln in status.read_text().splitlines() if ln.startswith("State:"))
        assert state.split()[1] == "Z", state


def test_cpu_build_runs_the_gpu_build_and_tools_paths(
    tmp_path: Path, stand_in_bundle: Path
) -> None:
    # The stand-in sdist goes through the same pip wheel, install and tool build commands as
    # the CUDA build does, without anything to compile.
    rc, report, md = _check(
        tmp_path,
        stand_in_bundle,
        "--cpu-build",
        "--max-tokens",
        "8",
        "--gammas",
        "4",
        "--bench-gammas",
        "4",
    )
    steps = {s["name"]: s for s in report["steps"]}
    assert rc == 0, report["steps"]
    assert steps["build llama-cpp-python"]["note"].startswith("llama_cpp_python-0.3.36-")
    assert (tmp_path / "work" / "site" / "gpucheck-build.json").is_file()
    assert (tmp_path / "work" / "site" / "gpucheck_stand_in_build.py").is_file()
    assert (tmp_path / "work" / "build" / "stand-in-built").is_file()
    assert steps["llama.cpp tools tiny"]["note"] == "llama-bench and llama-speculative ran"
    assert "| stand-in | tg16 | 123.4 |" in report["tools"]["llama-bench tiny"]
    speculative = report["tools"]["llama-speculative tiny"]
    assert "accept    = 90.000%" in speculative and "noise" not in speculative
    assert "## llama.cpp llama-speculative tiny" in md


def test_a_build_out_of_time_says_to_call_again(
    tmp_path: Path, stand_in_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_BUILD_SLEEP", "60")
    rc, report, _ = _check(tmp_path, stand_in_bundle, "--cpu-build", "--build-timeout-s", "3")
    assert rc == 1
    build = report["steps"][-1]
    assert build["name"] == "build llama-cpp-python" and build["status"] == "failed"
    assert "ran out of time after 3 s" in build["note"]
    assert "call the same command again while the machine is warm" in build["note"]
    assert (tmp_path / "out" / "build.log").is_file()

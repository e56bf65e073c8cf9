"""The self-contained bundle (packaging/build) runs with nothing from the development setup:
an empty environment (no PATH, no PYTHONPATH, no venv) and a fresh HOME.

Part of the whole suite: packaging/build rebuilds the folder only when its sources changed,
and its llama.cpp wheel is cached outside the checkout. The test build carries two CPU
variants instead of all of them (see TEST_CPU_VARIANTS)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.bundle

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "dist" / "SpecChat"
EXE = BUNDLE / "specchat"
LIB = BUNDLE / "_internal" / "llama_cpp" / "lib"
PROMPT = "The three primary colours are"
# The baseline every x86-64 CPU runs, and the AVX2 level most of today's CPUs pick: still a
# build that chooses its CPU code at run time, at a fraction of the all-variant build's time.
# SPECCHAT_CPU_VARIANTS=all tests the release's full set instead.
TEST_CPU_VARIANTS = "x64 haswell"
# The CPU features the haswell variant needs (ggml/src/CMakeLists.txt), as /proc/cpuinfo names them.
HASWELL_FLAGS = {"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"}


@pytest.fixture(scope="module")
def bundle() -> Path:
    """dist/SpecChat, built by packaging/build, which leaves an up-to-date folder alone."""
    env = {**os.environ}
    env.setdefault("SPECCHAT_CPU_VARIANTS", TEST_CPU_VARIANTS)
    subprocess.run(
        [str(ROOT / "packaging" / "build"), "--no-archive"], cwd=ROOT, env=env, check=True
    )
    assert EXE.is_file()
    return BUNDLE


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One fresh HOME for the module: the first run derives the demo family there (825 MiB),
    later tests start the way a returning user does."""
    path = tmp_path_factory.mktemp("home")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_bare(
    args: list[str], home: Path, timeout: float = 600, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    """Run the bundle as `env -i HOME=<fresh>` would: nothing else in the environment."""
    return subprocess.run(
        [str(EXE), *args],
        env={"HOME": str(home), **extra_env},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_version_matches_the_project(bundle: Path, home: Path) -> None:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        version = tomllib.load(handle)["project"]["version"]
    proc = run_bare(["--version"], home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"specchat {version}"


def test_generate_matches_the_venv_install(bundle: Path, home: Path, demo_models: Any) -> None:
    common = ["--max-tokens", "24", "--threads", "1", "--prompt", PROMPT, "--json"]
    proc = run_bare(["generate", "--target", "demo", "--draft", "demo", *common], home)
    assert proc.returncode == 0, proc.stderr
    frozen = json.loads(proc.stdout)
    # First run in a fresh HOME: the demo family was derived there, with byte progress.
    assert "writing SmolLM2-135M-Instruct.F32.gguf" in proc.stderr
    assert list((home / ".local" / "share" / "specchat" / "models" / "demo").glob("*.F32.gguf"))

    models = ["--target", str(demo_models.f32), "--draft", str(demo_models.q4_1)]
    venv = subprocess.run(
        [sys.executable, "-m", "app.cli", "generate", *models, *common],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert venv.returncode == 0, venv.stderr
    reference = json.loads(venv.stdout)
    # The draft model drafts with the suffix index, as everywhere by default.
    assert frozen["mode"] == reference["mode"] == "hybrid"
    assert len(frozen["token_ids"]) == 24
    assert frozen["token_ids"] == reference["token_ids"]
    assert frozen["text"] == reference["text"]


def test_the_cpu_backend_is_a_variant_chosen_at_run_time(bundle: Path, home: Path) -> None:
    """Portable: no CPU backend built for this machine, one library per CPU level instead, and
    llama.cpp loads the best one this CPU can run from the bundle's own folder."""
    variants = {
        p.name.removeprefix("libggml-cpu-").removesuffix(".so")
        for p in LIB.glob("libggml-cpu-*.so")
    }
    assert "x64" in variants and len(variants) >= 2, variants
    assert not (LIB / "libggml-cpu.so").exists()  # the plain (native) CPU backend
    proc = run_bare(
        ["generate", "--target", "demo", "--max-tokens", "1", "--threads", "1", "--prompt", "Hi"],
        home,
        SPECCHAT_LLAMA_LOG="1",
    )
    assert proc.returncode == 0, proc.stderr
    loaded = re.findall(r"loaded CPU backend from (\S+)", proc.stderr)
    assert len(loaded) == 1, proc.stderr
    chosen = Path(loaded[0])
    assert chosen.parent.samefile(LIB)
    variant = chosen.name.removeprefix("libggml-cpu-").removesuffix(".so")
    assert variant in variants
    cpu = re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
    assert cpu, "no CPU flags in /proc/cpuinfo"
    if "haswell" in variants and set(cpu[1].split()) >= HASWELL_FLAGS:
        assert variant != "x64", "an AVX2 CPU got the baseline variant"


def test_every_command_runs(bundle: Path, home: Path) -> None:
    """Each sub-command is in the bundle: its --help runs (catches modules PyInstaller missed)."""
    top = run_bare(["--help"], home)
    assert top.returncode == 0, top.stderr
    listed = top.stdout.split("{", 1)[1].split("}", 1)[0].split(",")
    assert {"generate", "bench", "models"} <= set(listed)
    for command in listed:
        proc = run_bare([command, "--help"], home)
        assert proc.returncode == 0, (command, proc.stderr)
    models = run_bare(["models", "list"], home)
    assert models.returncode == 0, models.stderr


def test_window_loads_the_demo_pair_offscreen_and_closes_cleanly(bundle: Path, home: Path) -> None:
    # SPECCHAT_SMOKE closes the window once the catalog arrives: the demo pair is loaded and
    # the spawned helper process (a second start of the frozen executable) answered.
    proc = run_bare([], home, timeout=300, QT_QPA_PLATFORM="offscreen", SPECCHAT_SMOKE="1")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "ERROR" not in proc.stderr
    # The window's store was created where a desktop user's data goes.
    assert (home / ".local" / "share" / "specchat" / "conversations.sqlite3").is_file()


def test_install_script_puts_a_valid_launcher_in_the_menu(bundle: Path, tmp_path: Path) -> None:
    home = tmp_path
    env = {"HOME": str(home), "PATH": os.defpath}
    subprocess.run([str(bundle / "install.sh")], env=env, check=True, capture_output=True)
    entry = home / ".local" / "share" / "applications" / "specchat.desktop"
    icon = home / ".local" / "share" / "icons" / "hicolor" / "scalable" / "apps" / "specchat.svg"
    assert icon.is_file()
    validator = shutil.which("desktop-file-validate")
    assert validator, "install desktop-file-utils to validate the launcher"
    check = subprocess.run([validator, str(entry)], capture_output=True, text=True, check=False)
    assert check.returncode == 0 and not check.stdout.strip(), check.stdout
    fields = dict(line.split("=", 1) for line in entry.read_text().splitlines() if "=" in line)
    exec_path = Path(fields["Exec"].strip('"'))
    assert exec_path.is_absolute() and exec_path.samefile(EXE)
    assert os.access(exec_path, os.X_OK)
    launched = subprocess.run(
        [str(exec_path), "--version"], env={"HOME": str(home)}, capture_output=True, check=False
    )
    assert launched.returncode == 0

    subprocess.run([str(bundle / "uninstall.sh")], env=env, check=True, capture_output=True)
    assert not entry.exists() and not icon.exists()
    assert EXE.is_file()  # uninstalling the launcher leaves the program alone

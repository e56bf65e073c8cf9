"""gpu-prepare: what the slimmed sdist keeps and drops, and the bundle's size budget.

The default run slims a stand-in sdist laid out like the real one (no network). The test of the
real sdist downloads 77 MB from PyPI and runs CMake on the result, so it carries the
`download` marker and runs with `pytest -m download` (docs/gpu-check.md): the default suite
stays light and offline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from scripts.gpucheck import prepare

VENDOR = "vendor/llama.cpp"
KEPT = (
    "CMakeLists.txt",
    "llama_cpp/__init__.py",
    f"{VENDOR}/CMakeLists.txt",
    f"{VENDOR}/ggml/src/ggml-cuda/ggml-cuda.cu",
    f"{VENDOR}/ggml/src/ggml-cpu/ggml-cpu.c",
    f"{VENDOR}/ggml/src/ggml-rpc/ggml-rpc.cpp",
    f"{VENDOR}/src/llama.cpp",
    f"{VENDOR}/common/common.cpp",
    f"{VENDOR}/tools/llama-bench/llama-bench.cpp",
    f"{VENDOR}/examples/speculative/speculative.cpp",
)
DROPPED = (
    ".git/modules/pack.pack",
    "docs/index.md",
    f"{VENDOR}/models/ggml-vocab-llama-bpe.gguf",
    f"{VENDOR}/docs/ops/CUDA.csv",
    f"{VENDOR}/ggml/src/ggml-vulkan/ggml-vulkan.cpp",
    f"{VENDOR}/ggml/src/ggml-metal/ggml-metal.m",
    f"{VENDOR}/tools/server/server.cpp",
    f"{VENDOR}/tools/ui/index.html",
    f"{VENDOR}/examples/simple/simple.cpp",
)


def _tree(root: Path) -> None:
    for rel in (*KEPT, *DROPPED, f"{VENDOR}/tools/CMakeLists.txt"):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n", encoding="utf-8")
    (root / VENDOR / "examples" / "CMakeLists.txt").write_text("x\n", encoding="utf-8")


def test_slim_tree_keeps_what_a_cuda_build_needs_and_drops_the_rest(tmp_path: Path) -> None:
    _tree(tmp_path)
    removed = prepare.slim_tree(tmp_path)
    for rel in KEPT:
        assert (tmp_path / rel).is_file(), rel
    for rel in DROPPED:
        assert not (tmp_path / rel).exists(), rel
    assert ".git" in removed and f"{VENDOR}/tools/server" in removed
    tools = (tmp_path / VENDOR / "tools" / "CMakeLists.txt").read_text(encoding="utf-8")
    assert "add_subdirectory(llama-bench)" in tools and "server" not in tools
    examples = (tmp_path / VENDOR / "examples" / "CMakeLists.txt").read_text(encoding="utf-8")
    assert "add_subdirectory(speculative)" in examples
    assert "add_subdirectory(simple)" not in examples


def test_slim_sdist_writes_a_tarball_under_the_same_top_folder(tmp_path: Path) -> None:
    top = tmp_path / "src" / f"{prepare.SDIST_NAME}-{prepare.SDIST_VERSION}"
    _tree(top)
    src = tmp_path / "full.tar.gz"
    with tarfile.open(src, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    dst = tmp_path / prepare.SDIST_FILE
    prepare.slim_sdist(src, dst)
    with tarfile.open(dst, "r:gz") as tar:
        names = set(tar.getnames())
    assert f"{top.name}/{VENDOR}/ggml/src/ggml-cuda/ggml-cuda.cu" in names
    assert not any("ggml-vulkan" in n or "/models/" in n for n in names)


def test_missing_sdist_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert prepare.main(["--bundle", str(tmp_path / "b"), "--sdist", str(tmp_path / "no")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


@pytest.mark.download  # the 77 MB sdist from PyPI: run with -m download
def test_real_bundle_fits_and_its_sdist_configures(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    manifest = prepare.prepare(bundle)
    total = int(str(manifest["total_bytes"]))
    assert total < prepare.BUNDLE_BUDGET_BYTES
    repo = Path(__file__).resolve().parents[2]
    assert total + prepare.tracked_bytes(repo) < prepare.CARRY_LIMIT_BYTES
    wheels = {name.split("-")[0] for name in manifest["wheels"]}  # type: ignore[attr-defined]
    assert wheels == {"gguf", "platformdirs", "diskcache", "scikit_build_core"}
    with tarfile.open(bundle / prepare.SDIST_FILE, "r:gz") as tar:
        tar.extractall(tmp_path / "src", filter="data")
    src = tmp_path / "src" / f"{prepare.SDIST_NAME}-{prepare.SDIST_VERSION}"
    if shutil.which("cmake") is None:
        pytest.fail("cmake is needed to check that the slimmed sdist configures")
    flags = [
        "-DLLAVA_BUILD=OFF",
        "-DGGML_RPC=ON",
        "-DLLAMA_BUILD_TOOLS=ON",
        "-DLLAMA_BUILD_EXAMPLES=ON",
        "-DGGML_CCACHE=OFF",
    ]
    done = subprocess.run(
        ["cmake", "-S", str(src), "-B", str(tmp_path / "build"), *flags],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # The check's own build command, with nothing to compile (LLAMA_BUILD=OFF): the bundle's
    # scikit-build-core builds a wheel offline, without isolation, in the given build folder.
    site = tmp_path / "site"
    wheels = sorted(str(p) for p in (bundle / "wheels").glob("*.whl"))
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "install", "-q", "--no-index", "--no-deps", "--target", str(site), *wheels],
        check=True,
    )
    env = {**os.environ, "PYTHONPATH": str(site), "CMAKE_ARGS": "-DLLAMA_BUILD=OFF"}
    done = subprocess.run(
        [
            *pip,
            "wheel",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "wheel"),
            f"--config-settings=build-dir={tmp_path / 'skbuild'}",
            str(src),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(list((tmp_path / "wheel").glob("llama_cpp_python-0.3.36-*.whl"))) == 1
    assert (tmp_path / "skbuild" / "CMakeCache.txt").is_file()

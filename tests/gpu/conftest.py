"""Fixtures for the GPU check's tests: tiny synthetic models and a stand-in bundle."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

from models.quantize import quantize_gguf
from models.synthetic import SHAPES, write_model
from scripts.gpucheck.prepare import SDIST_FILE, SDIST_NAME, SDIST_VERSION


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny random-weight F16 target and its Q8_0 copy."""
    folder = tmp_path_factory.mktemp("synthetic")
    target = write_model(folder / "tiny-f16.gguf", SHAPES["tiny"], dtype="F16", seed=3)
    return target, quantize_gguf(target, folder / "tiny-q8_0.gguf", "Q8_0", threads=1)


def make_wheel(folder: Path, name: str = "gpucheck_probe", version: str = "1.0") -> Path:
    """The smallest valid pure-Python wheel: one module, its metadata, its record."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": "VALUE = 1\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as whl:
        for n, text in files.items():
            whl.writestr(n, text)
        whl.writestr(f"{info}/RECORD", record)
    return path


_STAND_IN_CMAKE = """\
cmake_minimum_required(VERSION 3.21)
project(stand_in NONE)
# Stand-ins for llama.cpp's tools: "building" one copies a script that prints what they print.
foreach(tool llama-bench llama-speculative)
  add_custom_target(${tool}
    COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_CURRENT_SOURCE_DIR}/${tool}.sh bin/${tool})
endforeach()
"""
_STAND_IN_PYPROJECT = """\
[build-system]
requires = []
build-backend = "stand_in_backend"
backend-path = ["."]
"""
# A build backend in the sdist itself (offline, nothing to install): it writes a one-module
# wheel and leaves a mark in the build folder pip was told to use, as scikit-build-core would.
_STAND_IN_BACKEND = """\
import os, time, zipfile

NAME, VERSION = "llama_cpp_python", "0.3.36"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    time.sleep(float(os.environ.get("STAND_IN_BUILD_SLEEP", "0")))  # a build that runs long
    build_dir = (config_settings or {}).get("build-dir")
    if build_dir:
        os.makedirs(build_dir, exist_ok=True)
        open(os.path.join(build_dir, "stand-in-built"), "w").close()
    info = f"{NAME}-{VERSION}.dist-info"
    files = {
        "gpucheck_stand_in_build.py": "BUILT = True\\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)
        whl.writestr(f"{info}/RECORD", "".join(f"{p},,\\n" for p in files) + f"{info}/RECORD,,\\n")
    return name
"""
# Each refuses to run without an existing model file, as the real tools do.
_STAND_IN_TOOLS = {
    "llama-bench.sh": '[ -f "$2" ] || exit 3\necho "| model | test | t/s |"\n'
    'echo "| stand-in | tg16 | 123.4 |"\n',
    "llama-speculative.sh": '[ -f "$2" ] && [ -f "$4" ] || exit 3\n'
    'echo "decoded   16 tokens in    0.100 seconds, speed:  160.000 t/s" >&2\n'
    'echo "n_drafted = 20" >&2\necho "accept    = 90.000%" >&2\necho "noise" >&2\n',
}


def make_fake_sdist(folder: Path) -> Path:
    """An sdist-shaped tarball that configures, "builds" (its own backend, nothing compiled) and
    "builds" llama.cpp's two tools as scripts, in seconds and with no compiler."""
    top = folder / f"{SDIST_NAME}-{SDIST_VERSION}"
    top.mkdir(parents=True)
    (top / "CMakeLists.txt").write_text(_STAND_IN_CMAKE, encoding="utf-8")
    (top / "pyproject.toml").write_text(_STAND_IN_PYPROJECT, encoding="utf-8")
    (top / "stand_in_backend.py").write_text(_STAND_IN_BACKEND, encoding="utf-8")
    for name, body in _STAND_IN_TOOLS.items():
        script = top / name
        script.write_text("#!/bin/sh\n" + body, encoding="utf-8")
        script.chmod(0o755)
    path = folder / SDIST_FILE
    with tarfile.open(path, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    return path


@pytest.fixture
def stand_in_bundle(tmp_path: Path) -> Path:
    """A bundle laid out as gpu-prepare lays it out, with stand-in contents (no network)."""
    bundle = tmp_path / "bundle"
    (bundle / "wheels").mkdir(parents=True)
    make_wheel(bundle / "wheels")
    src = tmp_path / "sdist-src"
    src.mkdir()
    make_fake_sdist(src).rename(bundle / SDIST_FILE)
    return bundle

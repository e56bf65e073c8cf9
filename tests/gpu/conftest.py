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


def make_fake_sdist(folder: Path) -> Path:
    """An sdist-shaped tarball whose CMake project configures in a second, with no compiler."""
    top = folder / f"{SDIST_NAME}-{SDIST_VERSION}"
    top.mkdir(parents=True)
    (top / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.21)\nproject(stand_in NONE)\n", encoding="utf-8"
    )
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

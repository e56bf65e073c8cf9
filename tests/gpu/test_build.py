"""Build helpers of the GPU check that run before any compiler: cuBLAS from pip's wheel."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from scripts.gpucheck import build


def _fake_cuda(tmp_path: Path, *, header_beside_nvcc: bool) -> Path:
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n", encoding="utf-8")
    nvcc.chmod(0o755)
    if header_beside_nvcc:
        (tmp_path / "cuda" / "include").mkdir()
        (tmp_path / "cuda" / "include" / "cublas_v2.h").write_text("", encoding="utf-8")
    return nvcc


def _fake_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site" / "nvidia"
    (root / "cu13" / "include").mkdir(parents=True)
    (root / "cu13" / "include" / "cublas_v2.h").write_text("", encoding="utf-8")
    (root / "cu13" / "lib").mkdir()
    for name in ("libcublas.so.13", "libcublasLt.so.13"):
        (root / "cu13" / "lib" / name).write_text("", encoding="utf-8")
    package = types.ModuleType("nvidia")
    package.__path__ = [str(root)]
    monkeypatch.setitem(sys.modules, "nvidia", package)
    return root


def test_no_hints_when_cublas_is_beside_nvcc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc = _fake_cuda(tmp_path, header_beside_nvcc=True)
    _fake_wheel(tmp_path, monkeypatch)
    monkeypatch.setenv("PATH", f"{nvcc.parent}{os.pathsep}{os.environ['PATH']}")
    assert build.cublas_hints(tmp_path / "work") == []


def test_hints_point_at_the_wheel_and_link_every_name_the_loader_asks_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc = _fake_cuda(tmp_path, header_beside_nvcc=False)
    root = _fake_wheel(tmp_path, monkeypatch)
    monkeypatch.setenv("PATH", f"{nvcc.parent}{os.pathsep}{os.environ['PATH']}")
    hints = build.cublas_hints(tmp_path / "work")
    include = root / "cu13" / "include"
    shim = tmp_path / "work" / "cublas-shim"
    assert f"-DCMAKE_INCLUDE_PATH={include}" in hints
    assert f"-DCMAKE_LIBRARY_PATH={shim}" in hints
    assert f"-DCMAKE_CUDA_FLAGS=-I{include}" in hints
    names = sorted(p.name for p in shim.iterdir())
    assert names == ["libcublas.so", "libcublas.so.13", "libcublasLt.so", "libcublasLt.so.13"]
    assert os.path.realpath(shim / "libcublas.so") == str(root / "cu13" / "lib" / "libcublas.so.13")

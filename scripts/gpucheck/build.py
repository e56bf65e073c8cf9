"""Helpers for building llama-cpp-python and llama.cpp's tools on the GPU machine."""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
from pathlib import Path

TOOLS = ("llama-bench", "llama-speculative")


def tool_binaries(build: Path) -> dict[str, Path]:
    found = (p for p in build.rglob("llama-*") if p.is_file() and os.access(p, os.X_OK))
    return {p.name: p for p in found if p.name in TOOLS}


def built_with(site: Path, args: argparse.Namespace) -> bool:
    marker = site / "gpucheck-build.json"
    return marker.is_file() and ("-DGGML_CUDA=ON" in marker.read_text()) != args.cpu_smoke


def cublas_hints(work: Path) -> list[str]:
    """CMake hints when cuBLAS is not beside nvcc but in the nvidia-cublas wheel (pip's layout
    has headers and versioned .so files only, so links named as the linker expects are made).

    The links sit in one folder under the versioned names too: the build puts folders outside
    the build tree on the library's run path, so the loader finds libcublas.so.N there."""
    cuda_home = Path(shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc").resolve().parents[1]
    if any(
        (cuda_home / d / "cublas_v2.h").exists()
        for d in ("include", "targets/x86_64-linux/include")
    ):
        return []
    try:  # the CUDA wheels' namespace package, present or not
        nvidia = importlib.import_module("nvidia")
    except ImportError:
        return []
    for root in map(Path, nvidia.__path__):
        for header in root.rglob("cublas_v2.h"):
            lib_dir = header.parent.parent / "lib"
            shim = work / "cublas-shim"
            shim.mkdir(parents=True, exist_ok=True)
            for lib in lib_dir.glob("libcublas*.so.*"):
                for name in (lib.name.split(".so")[0] + ".so", lib.name):
                    link = shim / name
                    if not link.exists():
                        link.symlink_to(lib)
            include = header.parent
            return [
                f"-DCMAKE_INCLUDE_PATH={include}",
                f"-DCMAKE_LIBRARY_PATH={shim}",
                f"-DCMAKE_CUDA_FLAGS=-I{include}",
                f"-DCMAKE_CXX_FLAGS=-I{include}",
            ]
    return []

"""Build `gpu-bundle/`: a slimmed llama-cpp-python sdist plus the pure-Python wheels the GPU check
needs on a machine with no package index.

The GPU machine accepts at most 64 MiB of files with each command, the project's tracked files
included; the full sdist alone is about 77 MB, most of it a vendored git pack, tokenizer test
vocabularies, docs and the sources of backends a CUDA or CPU build never compiles. What stays is
what `pip wheel` of the sdist needs with LLAVA_BUILD=OFF, plus llama.cpp's own llama-bench and
speculative examples, which the check builds when time allows (their CMake lists are cut down
to those targets).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SDIST_NAME = "llama_cpp_python"
SDIST_VERSION = "0.3.36"
SDIST_FILE = f"{SDIST_NAME}-{SDIST_VERSION}.tar.gz"
# Pure-Python packages the check imports there that the machine's image lacks (numpy, jinja2,
# PyYAML, psutil, nvidia-ml-py, cmake and ninja are in the image). scikit-build-core is the
# sdist's build backend; the build runs without isolation, so it must be importable.
WHEELS = (
    "gguf==0.19.0",
    "platformdirs==4.14.9",
    "diskcache==5.6.3",
    "scikit-build-core==1.1.2",
)
CARRY_LIMIT_BYTES = 64 * 1024 * 1024
# Room left for the project's tracked files and the check's own outputs.
BUNDLE_BUDGET_BYTES = 40 * 1024 * 1024

_VENDOR = "vendor/llama.cpp"
# Paths removed from the unpacked sdist, relative to its top folder.
REMOVE = (
    ".git",
    ".github",
    "docs",
    "docker",
    "examples",
    "tests",
    f"{_VENDOR}/.devops",
    f"{_VENDOR}/.github",
    f"{_VENDOR}/models",
    f"{_VENDOR}/docs",
    f"{_VENDOR}/benches",
    f"{_VENDOR}/media",
    f"{_VENDOR}/tests",
    f"{_VENDOR}/gguf-py",
    f"{_VENDOR}/conversion",
    f"{_VENDOR}/requirements",
    f"{_VENDOR}/skills",
    f"{_VENDOR}/grammars",
    *(
        f"{_VENDOR}/ggml/src/ggml-{name}"
        for name in (
            "blas", "cann", "et", "hexagon", "hip", "metal", "musa", "opencl", "openvino",
            "sycl", "virtgpu", "vulkan", "webgpu", "zdnn", "zendnn",
        )
    ),
)  # fmt: skip
# Tools and examples kept (everything else in those folders goes): llama.cpp's own benchmark
# and speculative decoding, to compare SpecChat with on the same models.
KEEP_TOOLS = ("llama-bench",)
KEEP_EXAMPLES = ("speculative", "speculative-simple")

_TOOLS_CMAKE = """\
# Cut down for the GPU check: only llama.cpp's benchmark is built from tools/.
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(llama-bench)
"""
_EXAMPLES_CMAKE = """\
# Cut down for the GPU check: only the speculative decoding examples are built.
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(speculative)
add_subdirectory(speculative-simple)
"""


def slim_tree(root: Path) -> list[str]:
    """Slim an unpacked sdist in place; returns the removed paths (relative, sorted)."""
    removed: list[str] = []
    for rel in REMOVE:
        path = root / rel
        if path.is_dir():
            shutil.rmtree(path)
            removed.append(rel)
        elif path.exists():
            path.unlink()
            removed.append(rel)
    for folder, keep, cmake in (
        ("tools", KEEP_TOOLS, _TOOLS_CMAKE),
        ("examples", KEEP_EXAMPLES, _EXAMPLES_CMAKE),
    ):
        base = root / _VENDOR / folder
        for child in sorted(base.iterdir()):
            if child.is_dir() and child.name not in keep:
                shutil.rmtree(child)
                removed.append(f"{_VENDOR}/{folder}/{child.name}")
        (base / "CMakeLists.txt").write_text(cmake, encoding="utf-8")
    return sorted(removed)


def slim_sdist(src: Path, dst: Path) -> list[str]:
    """Write a slimmed copy of the sdist `src` to `dst` (both .tar.gz); returns removed paths."""
    top = f"{SDIST_NAME}-{SDIST_VERSION}"
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(src, "r:gz") as tar:
            tar.extractall(tmp, filter="data")
        root = Path(tmp) / top
        if not root.is_dir():
            raise SystemExit(f"error: {src} does not hold {top}/")
        removed = slim_tree(root)
        partial = dst.with_name(dst.name + ".partial")
        with tarfile.open(partial, "w:gz", compresslevel=9) as tar:
            tar.add(root, arcname=top)
        partial.replace(dst)
    return removed


def _pip_download(args: list[str], dest: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest)]
    subprocess.run(cmd + args, check=True)


def prepare(bundle: Path, *, sdist: Path | None = None) -> dict[str, object]:
    """Fill `bundle` (sdist from PyPI unless given, then the wheels); returns its manifest."""
    bundle.mkdir(parents=True, exist_ok=True)
    wheels = bundle / "wheels"
    if wheels.exists():
        shutil.rmtree(wheels)
    wheels.mkdir()
    with tempfile.TemporaryDirectory() as tmp:
        if sdist is None:
            _pip_download(["--no-binary", ":all:", f"{SDIST_NAME}=={SDIST_VERSION}"], Path(tmp))
            sdist = Path(tmp) / SDIST_FILE
        removed = slim_sdist(sdist, bundle / SDIST_FILE)
    _pip_download(
        [
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            "--platform",
            "manylinux_2_17_x86_64",
            *WHEELS,
        ],
        wheels,
    )
    files = sorted(p for p in bundle.rglob("*") if p.is_file() and p.name != "manifest.json")
    manifest: dict[str, object] = {
        "sdist": SDIST_FILE,
        "removed_from_sdist": removed,
        "wheels": sorted(p.name for p in wheels.iterdir()),
        "files": {str(p.relative_to(bundle)): p.stat().st_size for p in files},
        "total_bytes": sum(p.stat().st_size for p in files),
    }
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def tracked_bytes(repo: Path) -> int:
    """Size of the files git tracks in `repo`: they travel with every command too."""
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z"], check=True, capture_output=True
    ).stdout
    names = [n for n in out.decode().split("\0") if n]
    return sum((repo / n).stat().st_size for n in names if (repo / n).is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-prepare", description=__doc__)
    parser.add_argument("--bundle", type=Path, default=Path("gpu-bundle"))
    parser.add_argument(
        "--sdist", type=Path, default=None, help="use this sdist instead of downloading it"
    )
    args = parser.parse_args(argv)
    if args.sdist is not None and not args.sdist.is_file():
        print(f"error: sdist {args.sdist} does not exist", file=sys.stderr)
        return 1
    try:
        manifest = prepare(args.bundle, sdist=args.sdist)
    except subprocess.CalledProcessError as exc:
        print(f"error: pip download failed (exit {exc.returncode})", file=sys.stderr)
        return 1
    total = int(str(manifest["total_bytes"]))
    repo = tracked_bytes(Path.cwd())
    mib = 1024 * 1024
    print(f"bundle {args.bundle}: {total / mib:.1f} MiB ({len(manifest['files'])} files)")  # type: ignore[arg-type]
    print(f"with the tracked files ({repo / mib:.1f} MiB): {(total + repo) / mib:.1f} MiB "
          f"of the {CARRY_LIMIT_BYTES // mib} MiB carry limit")  # fmt: skip
    if total > BUNDLE_BUDGET_BYTES:
        print(f"error: bundle over its {BUNDLE_BUDGET_BYTES // mib} MiB budget", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

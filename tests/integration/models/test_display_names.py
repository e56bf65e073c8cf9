"""Models are named by what tells them apart: general.name, unless it is a training run's tag
shared by every quantization (SmolLM2's "Smollm2 135M 8k Lc100K Mix1 Ep2"), then the file's
own name less its quantization."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.gguf import inspect_gguf
from models.gguf.build import display_name
from tests.helpers.model_files import bundled_q4_1


def test_the_demo_file_is_named_after_its_file_not_its_training_run() -> None:
    info = inspect_gguf(bundled_q4_1())
    assert info.name == "SmolLM2-135M-Instruct"


def test_gemma_keeps_its_general_name(gemma_model: Path) -> None:
    assert inspect_gguf(gemma_model).name == "Gemma 3 270m"


@pytest.mark.parametrize(
    ("general_name", "finetune", "file", "expected"),
    [
        (
            "Llama 3.2 1B Instruct",
            "Instruct",
            "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
            "Llama 3.2 1B Instruct",
        ),
        (None, None, "Qwen2.5-0.5B-Instruct-IQ3_XXS.gguf", "Qwen2.5-0.5B-Instruct"),
        ("My Model Run 7 Ep3", "run-7-ep3", "my-model.f16.gguf", "my-model"),
        ("Phi 3 Mini", None, "phi-3-mini.gguf", "Phi 3 Mini"),
    ],
)
def test_display_name_rules(
    general_name: str | None, finetune: str | None, file: str, expected: str
) -> None:
    assert display_name(general_name, finetune, Path(file)) == expected

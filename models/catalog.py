"""A short list of target/draft pairs known to work for speculative decoding. Data only.

Each model is a Hub repository plus a file pattern for `models.hub.pull` (a glob, so a split
file or a renamed upload still matches). None of these was downloaded or checked here: the
machines that build SpecChat have no route to the Hub (`verified_offline` is False throughout).
Run `specchat models pull REPO --file PATTERN` for each half, then `check_compatibility` decides.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CATALOG", "CatalogModel", "CatalogPair", "find_pair"]


@dataclass(frozen=True)
class CatalogModel:
    repo_id: str
    file_pattern: str  # for models.hub.select_file: exact name, glob or substring
    label: str
    approx_size_gb: float  # download size, roughly


@dataclass(frozen=True)
class CatalogPair:
    key: str
    title: str
    target: CatalogModel
    draft: CatalogModel
    note: str
    verified_offline: bool = False  # True only once a pair was pulled and checked by our tests


CATALOG: tuple[CatalogPair, ...] = (
    CatalogPair(
        key="qwen2.5-7b",
        title="Qwen2.5 7B Instruct + Qwen2.5 0.5B Instruct",
        target=CatalogModel(
            "Qwen/Qwen2.5-7B-Instruct-GGUF",
            "qwen2.5-7b-instruct-q4_k_m*.gguf",
            "Qwen2.5 7B Instruct Q4_K_M",
            4.7,
        ),
        draft=CatalogModel(
            "Qwen/Qwen2.5-0.5B-Instruct-GGUF",
            "qwen2.5-0.5b-instruct-q8_0.gguf",
            "Qwen2.5 0.5B Instruct Q8_0",
            0.7,
        ),
        note="vocabularies differ by 128 padding rows, inside llama.cpp's tolerance",
    ),
    CatalogPair(
        key="llama3.1-8b",
        title="Llama 3.1 8B Instruct + Llama 3.2 1B Instruct",
        target=CatalogModel(
            "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF",
            "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
            "Llama 3.1 8B Instruct Q4_K_M",
            4.9,
        ),
        draft=CatalogModel(
            "bartowski/Llama-3.2-1B-Instruct-GGUF",
            "Llama-3.2-1B-Instruct-Q8_0.gguf",
            "Llama 3.2 1B Instruct Q8_0",
            1.3,
        ),
        note="same Llama 3 tokenizer (128,256 tokens)",
    ),
    CatalogPair(
        key="gemma3-12b",
        title="Gemma 3 12B it + Gemma 3 270M it",
        target=CatalogModel(
            "ggml-org/gemma-3-12b-it-GGUF",
            "gemma-3-12b-it-Q4_K_M.gguf",
            "Gemma 3 12B it Q4_K_M",
            7.3,
        ),
        draft=CatalogModel(
            "ggml-org/gemma-3-270m-it-GGUF",
            "gemma-3-270m-it-Q8_0.gguf",
            "Gemma 3 270M it Q8_0",
            0.3,
        ),
        note="same Gemma 3 tokenizer (262k tokens); the 270M draft is tiny next to 12B",
    ),
    CatalogPair(
        key="smollm2-1.7b",
        title="SmolLM2 1.7B Instruct + SmolLM2 135M Instruct",
        target=CatalogModel(
            "HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF",
            "*q4_k_m*.gguf",
            "SmolLM2 1.7B Instruct Q4_K_M",
            1.1,
        ),
        draft=CatalogModel(
            "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF",
            "*q8_0*.gguf",
            "SmolLM2 135M Instruct Q8_0",
            0.15,
        ),
        note="the demo model's family at a useful size; runs on a CPU-only laptop",
    ),
)


def find_pair(key: str) -> CatalogPair | None:
    return next((pair for pair in CATALOG if pair.key == key), None)

"""Product code uses the public API of llama-cpp-python, huggingface_hub and gguf; the private
names it cannot do without are named in one adapter module per library, and nowhere else.

A private use is an import of a module or name starting with "_" from one of those libraries,
an attribute starting with "_" read off one of their modules, or a private method overridden in
a subclass of one of their classes.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("app", "models", "ui")
LIBRARIES = frozenset({"llama_cpp", "huggingface_hub", "gguf"})
# The adapters: each names its private uses in its docstring and has a unit test that fails when
# the library drops them.
ADAPTERS = frozenset({"app/llama/native.py"})


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _library(module: str | None) -> str | None:
    root = (module or "").split(".")[0]
    return root if root in LIBRARIES else None


def private_uses(source: str) -> list[str]:
    """Each private use of the libraries in one module's source, as 'line: what'."""
    tree = ast.parse(source)
    modules: set[str] = set()  # local names bound to one of the libraries' modules
    classes: set[str] = set()  # local names imported from them (classes among them)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _library(alias.name) is None:
                    continue
                if any(_private(part) for part in alias.name.split(".")):
                    found.append(f"{node.lineno}: import {alias.name}")
                modules.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _library(node.module):
            assert node.module is not None
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{node.lineno}: from {node.module}")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                modules.add(alias.asname or alias.name)
                classes.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ClassDef):
            bases = {ast.unparse(base).split(".")[0] for base in node.bases}
            if bases & (classes | modules):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(
                        item.name
                    ):
                        found.append(f"{item.lineno}: {node.name}.{item.name} overrides")
    return sorted(set(found), key=lambda text: int(text.split(":")[0]))


def private_use_violations(root: Path) -> list[str]:
    """Private uses outside the adapters, as 'file:line: what'."""
    violations = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative in ADAPTERS:
                continue
            for use in private_uses(path.read_text(encoding="utf-8")):
                violations.append(f"{relative}:{use}")
    return violations


def test_only_the_adapters_use_private_names_of_the_libraries() -> None:
    assert private_use_violations(ROOT) == []


def test_every_adapter_says_which_private_names_it_uses() -> None:
    for adapter in ADAPTERS:
        doc = ast.get_docstring(ast.parse((ROOT / adapter).read_text(encoding="utf-8"))) or ""
        assert private_uses((ROOT / adapter).read_text(encoding="utf-8")), adapter
        assert "private" in doc and "pyproject.toml" in doc, adapter


def test_a_planted_private_use_is_caught(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "app/hub.py").write_text(
        "from huggingface_hub.utils._headers import build_hf_headers\n"
        "from huggingface_hub.utils import build_hf_headers as public\n"
    )
    (tmp_path / "models/lib.py").write_text(
        "import llama_cpp.llama_cpp as bindings\n"
        "import llama_cpp\n"
        "lib = bindings._lib\n"
        "path = bindings.__file__\n"
        "model = llama_cpp._ggml.libggml\n"
        "from llama_cpp import _ggml\n"
    )
    (tmp_path / "ui/reader.py").write_text(
        "from gguf import GGUFReader\n"
        "import gguf\n"
        "class Fast(GGUFReader):\n"
        "    def _get(self): ...\n"
        "    def fields(self): ...\n"
        "class Other(gguf.GGUFReader):\n"
        "    def _get_field_parts(self): ...\n"
        "class Mine:\n"
        "    def _own(self): ...\n"
    )
    (tmp_path / "app/llama").mkdir()
    (tmp_path / "app/llama/native.py").write_text("from llama_cpp import _ggml\n")
    assert private_use_violations(tmp_path) == [
        "app/hub.py:1: from huggingface_hub.utils._headers",
        "models/lib.py:3: bindings._lib",
        "models/lib.py:5: llama_cpp._ggml",
        "models/lib.py:6: from llama_cpp import _ggml",
        "ui/reader.py:4: Fast._get overrides",
        "ui/reader.py:7: Other._get_field_parts overrides",
    ]

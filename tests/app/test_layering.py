"""app/ and models/ must never import Qt: the engine runs headless and in the worker thread."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules(package: str) -> list[str]:
    return [
        f"{package}.{info.name}"
        for info in pkgutil.iter_modules([str(ROOT / package)])
        if not info.name.startswith("_")
    ]


def test_engine_and_model_packages_import_no_qt() -> None:
    modules = _modules("app") + _modules("models")
    assert "app.engine" in modules and "models.inspect" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "qt = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'PySide6', 'shiboken6', 'PyQt5', 'PyQt6'})\n"
        "print(','.join(qt))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""

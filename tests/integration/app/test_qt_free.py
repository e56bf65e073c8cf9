"""app/ and models/ never load Qt: the engine runs headless and in the window's worker thread.
Every module is imported in a fresh interpreter, so nothing imported before can hide a Qt import.
"""

from __future__ import annotations

import subprocess
import sys

from tests.unit.app.test_layering import ROOT, _modules


def test_engine_and_model_packages_import_no_qt() -> None:
    modules = [m for m in _modules("app") + _modules("models") if not m.startswith("app.cli")]
    assert "app.engine.loop" in modules and "models.gguf" in modules
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

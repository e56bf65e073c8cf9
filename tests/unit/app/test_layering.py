"""Imports run one way, ui → models → app, and app/ and models/ never import Qt.

app/cli is the composition root: it alone in app/ may import models and ui. The engine runs
headless and in the window's worker thread, so Qt must never load from app/ or models/.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# What each top-level package may not import; app/cli is exempt as the composition root.
FORBIDDEN = {"app": {"models", "ui"}, "models": {"ui"}}
EXEMPT = ("app/cli/",)
# Rooms inside the packages, one way down: a folder may not import the modules listed, except
# from the files named. The window reaches the HTTP server through its Local server switch only.
ROOMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "app/llama": (("app.engine", "app.metrics", "app.server", "app.bench", "app.cli"), ()),
    "app/metrics": (("app.engine", "app.server", "app.bench", "app.cli"), ()),
    "app/engine": (("app.server", "app.bench", "app.cli"), ()),
    # The HTTP server and the bench are front ends side by side: neither reaches the other.
    "app/server": (("app.bench", "app.cli"), ()),
    "app/bench": (("app.server", "app.cli"), ()),
    "ui": (("app.server", "app.cli"), ("ui/workers/local_server.py",)),
}


def _imported_packages(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def upward_imports(root: Path) -> list[str]:
    """Every import in root's packages that runs against the layering, as 'file: package'."""
    violations = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative.startswith(EXEMPT):
                continue
            for name in sorted(_imported_packages(path.read_text(encoding="utf-8")) & forbidden):
                violations.append(f"{relative}: {name}")
    return violations


def _imported_modules(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def room_violations(root: Path) -> list[str]:
    """Every import that reaches a room above its own (ROOMS), as 'file: module'."""
    violations = []
    for room, (forbidden, allowed) in ROOMS.items():
        for path in sorted((root / room).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative in allowed:
                continue
            for name in sorted(_imported_modules(path.read_text(encoding="utf-8"))):
                if any(name == f or name.startswith(f + ".") for f in forbidden):
                    violations.append(f"{relative}: {name}")
    return violations


def _modules(package: str) -> list[str]:
    names = []
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_imports_run_from_ui_to_models_to_app_only() -> None:
    assert upward_imports(ROOT) == []


def test_a_planted_upward_import_is_caught(tmp_path: Path) -> None:
    for package in ("app/engine", "app/cli", "models", "ui"):
        (tmp_path / package).mkdir(parents=True)
    (tmp_path / "app/engine/loop.py").write_text("from models.compat import x\nimport ui.main\n")
    (tmp_path / "app/cli/main.py").write_text("from models import cli\nfrom ui.main import run\n")
    (tmp_path / "models/compat.py").write_text("from app.errors import E\nfrom ui import x\n")
    (tmp_path / "ui/main.py").write_text("from models import compat\nfrom app import errors\n")
    assert upward_imports(tmp_path) == [
        "app/engine/loop.py: models",
        "app/engine/loop.py: ui",
        "models/compat.py: ui",
    ]


def test_rooms_inside_the_packages_import_only_downwards() -> None:
    assert room_violations(ROOT) == []


def test_a_planted_import_of_a_room_above_is_caught(tmp_path: Path) -> None:
    for room in (
        "app/llama",
        "app/metrics",
        "app/engine",
        "app/server",
        "app/bench",
        "ui/workers",
        "ui/window",
    ):
        (tmp_path / room).mkdir(parents=True)
    (tmp_path / "app/llama/model.py").write_text("from app.engine.config import ModelConfig\n")
    (tmp_path / "app/metrics/summary.py").write_text("from app.llama.model import LlamaModel\n")
    (tmp_path / "app/engine/loop.py").write_text("import app.server.app\n")
    (tmp_path / "ui/workers/engine.py").write_text("from app.engine.job_driver import Job\n")
    (tmp_path / "ui/window/main.py").write_text("from app.server.owner import JobRunner\n")
    (tmp_path / "ui/workers/local_server.py").write_text("from app.server.app import create_app\n")
    (tmp_path / "app/server/app.py").write_text("from app.cli.serve import main\n")
    (tmp_path / "app/bench/run.py").write_text("from app.server.app import create_app\n")
    assert room_violations(tmp_path) == [
        "app/llama/model.py: app.engine.config",
        "app/engine/loop.py: app.server.app",
        "app/server/app.py: app.cli.serve",
        "app/bench/run.py: app.server.app",
        "ui/window/main.py: app.server.owner",
    ]

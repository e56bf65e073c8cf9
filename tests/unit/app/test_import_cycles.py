"""No import circles inside app/: every module can be read, and changed, from the bottom up.

Every import counts, also those inside functions or under TYPE_CHECKING: a circle that only
shows at type-checking time, or on first use, is still two modules that cannot be understood
apart.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, package: str = "app") -> dict[str, set[str]]:
    modules = {_module_name(root, p): p for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from app.metrics import measured` imports the module app.metrics.measured.
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_app_has_no_import_circles() -> None:
    graph = import_graph(ROOT)
    assert "app.engine.loop" in graph and "app.cli.bench" in graph
    assert cycles(graph) == []


def test_a_planted_circle_is_caught(tmp_path: Path) -> None:
    (tmp_path / "app/engine").mkdir(parents=True)
    (tmp_path / "app/metrics").mkdir(parents=True)
    (tmp_path / "app/engine/events.py").write_text("from app.engine.result import R\n")
    (tmp_path / "app/engine/result.py").write_text("from app.metrics import summary\n")
    (tmp_path / "app/metrics/summary.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import app.engine.events\n"
    )
    (tmp_path / "app/metrics/leaf.py").write_text("import app.metrics.summary\n")
    assert cycles(import_graph(tmp_path)) == [
        ["app.engine.events", "app.engine.result", "app.metrics.summary"]
    ]

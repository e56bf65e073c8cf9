"""Screenshots of the Models and Compare dialogs and the Insight tab, on the demo models.

    QT_QPA_PLATFORM=offscreen PYTHONPATH=. python scripts/dialog_screenshots.py [docs/screenshots]

Builds (or reuses) the demo family in a throw-away data folder, runs a short real comparison
and one real reply with the Q4_1 draft, and saves models.png, compare.png and insight.png at
the widgets' default sizes (the Insight tab at the window's 300 px panel width).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

from app.bench.plan import DraftChoice
from app.bench.session import prompt_bench
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import FinishEvent
from app.engine.gamma import fixed
from app.engine.runtime import Runtime
from app.llama.config import ModelConfig
from models.compat import check_draft_file
from models.demo import ensure_demo_models
from ui.dialogs.compare_dialog import CompareDialog
from ui.dialogs.models_dialog import ModelsDialog
from ui.widgets.insight_panel import InsightPanel


def _settle(app: QApplication, until: float = 0.3, done: Callable[[], bool] | None = None) -> None:
    """Run the event loop until `done()` (at most ten minutes), then a little longer."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        app.processEvents()
        if done is None or done():
            break
        time.sleep(0.02)
    end = time.monotonic() + until
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.02)


def _save(widget: QWidget, path: Path) -> None:
    widget.grab().save(str(path))
    print(f"wrote {path} ({widget.width()}×{widget.height()})")


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    # The demo family (about 0.8 GB) is built in a folder that goes away with the script.
    with tempfile.TemporaryDirectory(prefix="specchat-shots-") as folder:
        os.environ["SPECCHAT_DATA_DIR"] = folder
        _shoot(out, Path(folder))
    return 0


def _shoot(out: Path, data: Path) -> None:
    app = QApplication.instance() or QApplication(sys.argv)
    assert isinstance(app, QApplication)

    demo = ensure_demo_models()
    models = ModelsDialog(
        extra_dirs=[], hf_cache=data / "no-hf-cache", lmstudio_dirs=[], loaded=(demo.f32, demo.q4_1)
    )
    models.show()
    _settle(app, done=lambda: not models.busy and models.local.selected_path() is not None)
    _settle(app, done=lambda: not models.busy)
    _save(models, out / "models.png")
    models.shutdown()

    prompt = "Write a short Python function that reverses a string, then explain it."
    target = ModelConfig(str(demo.f32), n_ctx=1024, n_threads=1)
    draft_template = ModelConfig(str(demo.q4_1), n_ctx=1024, n_threads=1)
    bench = prompt_bench(
        target=target,
        drafts=[DraftChoice(p.name, p) for p in demo.drafts.values()],
        gammas=[fixed(4)],
        base=GenerationConfig(max_tokens=64, gamma=fixed(4)),
        draft_template=draft_template,
    )
    compare = CompareDialog(bench, prompt=prompt)
    compare.show()
    compare.start()
    _settle(app, done=lambda: not compare.running)
    compare.table.selectRow(2)
    _settle(app)
    _save(compare, out / "compare.png")
    compare.close()

    runtime = Runtime(vet_draft=check_draft_file)
    try:
        runtime.load_target(target)
        runtime.load_draft(draft_template)
        ids = runtime.chat_prompt([{"role": "user", "content": prompt}])
        events = list(
            runtime.generate(
                ids, GenerationConfig(max_tokens=96, gamma=fixed(4)), GenerationControl()
            )
        )
    finally:
        runtime.close()
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    insight = InsightPanel()
    insight.update_from_result(finish.result)
    # As the window holds it: a 300 px wide panel that scrolls vertically, never sideways.
    scroll = QScrollArea()
    scroll.setWidget(insight)
    scroll.setWidgetResizable(True)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    scroll.resize(300, 640)
    scroll.show()
    _settle(app)
    _save(insight, out / "insight.png")  # the whole panel, as scrolling would show it


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/screenshots")))

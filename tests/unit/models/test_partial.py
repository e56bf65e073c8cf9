"""Two writers of one derived model file never share the file they write before it is whole."""

from __future__ import annotations

import threading
from pathlib import Path

from models.partial import partial_path


def test_each_thread_writes_its_own_partial_file_beside_the_final_name(tmp_path: Path) -> None:
    dst = tmp_path / "model.Q4_0.gguf"
    seen: list[Path] = []
    other = threading.Thread(target=lambda: seen.append(partial_path(dst)))
    other.start()
    other.join()

    mine = partial_path(dst)

    assert mine.parent == dst.parent and mine.name.startswith(dst.name)
    assert mine.suffix == ".partial"  # model discovery passes over it
    assert mine != seen[0]

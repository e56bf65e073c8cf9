"""Wall-clock figures from tests, reported at the end of the run rather than asserted.

Shared 2-core machines make wall-clock asserts flaky, so the default run only reports these;
tests marked `perf` (run with `-m perf` on a quiet machine) also assert their budgets.
"""

from __future__ import annotations

import pytest

_TIMINGS: list[tuple[str, str, float, float]] = []


def report_timing(request: pytest.FixtureRequest, name: str, seconds: float, budget: float) -> None:
    """Record a figure with the budget it should meet on a quiet machine."""
    _TIMINGS.append((request.node.nodeid, name, seconds, budget))
    if request.node.get_closest_marker("perf") is not None:
        assert seconds < budget, f"{name}: {seconds:.3f} s, budget {budget:.3f} s"


def write_timing_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _TIMINGS:
        return
    terminalreporter.section("timing figures (budgets asserted only under -m perf)")
    for nodeid, name, seconds, budget in _TIMINGS:
        flag = "" if seconds < budget else "  OVER BUDGET"
        terminalreporter.write_line(
            f"{name}: {seconds * 1000:.1f} ms (budget {budget * 1000:.0f} ms){flag}  [{nodeid}]"
        )

"""The Insight panel: the cost model's reference values in the what-if sliders, the round table
and the speedup chart from real rounds (scripted, then from the engine on the demo models)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from PySide6.QtWidgets import QTableWidgetItem
from pytestqt.qtbot import QtBot

from app.engine.config import GenerationConfig
from app.engine.events import FinishEvent, RoundEvent
from app.engine.gamma import fixed
from app.engine.runtime import Runtime
from app.llama.config import ModelConfig
from app.metrics.cost_model import MAX_GAMMA, MAX_STOPPED_GAMMA
from app.metrics.insight import analyse
from tests.helpers.bench_data import (
    PLAIN_STEP_S,
    result_from_rounds,
    round_record,
    seed_rounds,
    useless_rounds,
)
from tests.helpers.engine import loaded_runtime
from ui.widgets.insight_panel import InsightPanel


def _text(item: QTableWidgetItem | None) -> str:
    assert item is not None
    return item.text()


@pytest.fixture
def panel(qtbot: QtBot) -> InsightPanel:
    widget = InsightPanel()
    qtbot.addWidget(widget)
    widget.resize(700, 900)
    return widget


def test_what_if_opens_on_the_seed_defaults(panel: InsightPanel) -> None:
    w = panel.what_if
    assert w.current() == (0.80, 4, 0.10, 1.00)
    assert w.expected.text().startswith("3.362")
    assert "closed form 3.362" in w.expected.text()
    assert w.cost.text().startswith("1.40")
    assert w.speedup.text().startswith("2.40×")
    assert w.passes.text() == "0.416"
    assert w.ceiling.text() == "67.2 %"
    assert w.best.text().startswith("6 at 2.47×")


def test_what_if_sliders_move_the_figures(panel: InsightPanel) -> None:
    w = panel.what_if
    assert w.gamma.maximum() == MAX_GAMMA == 16  # the one γ ceiling
    w.gamma.setValue(16)
    assert w.expected.text().startswith("4.887")  # (1 - 0.8^17) / 0.2
    assert w.speedup.text().startswith("1.88×")  # 4.887 / (16 × 0.10 + 1)
    w.set_defaults()
    w.c_draft.setValue(99)  # a draft as dear as the target: no γ pays
    assert w.best.text().startswith("0 at 1.00×") and "do not speculate" in w.best.text()
    w.set_values(1.0, 4, 0.1, 1.0)  # α = 1 must not divide by zero
    assert w.expected.text().startswith("5.000")


def test_finished_reply_fills_the_round_table_and_chart(panel: InsightPanel, qtbot: QtBot) -> None:
    result = result_from_rounds(seed_rounds())
    panel.update_from_result(result)
    table = panel.table
    assert table.rowCount() == 6
    headers = [_text(table.horizontalHeaderItem(c)) for c in range(table.columnCount())]

    def cell(row: int, name: str) -> str:
        return _text(table.item(row, headers.index(name)))

    assert [cell(r, "accepted") for r in range(6)] == ["4", "2", "0", "3", "1", "4"]
    assert [cell(r, "rejected at") for r in range(6)] == ["bonus", "3", "1", "4", "2", "bonus"]
    assert cell(5, "Σ tokens") == "20"
    assert cell(5, "Σ draft passes") == "24"
    assert cell(5, "Σ target passes") == "6"
    assert cell(5, "Σ cost") == "8.40"  # the worked table's cumulative cost

    chart = panel.chart
    assert chart.current_gamma == 4
    assert chart.measured[4] == pytest.approx(20 / 8.4)  # the worked table's 2.38× measured
    # Per-position acceptance makes E the measured tokens per round: predicted = measured here.
    assert chart.curve[4] == pytest.approx(20 / 8.4)
    assert chart.curve[0] == 1.0
    assert chart.best_gamma == max(range(len(chart.curve)), key=lambda g: (chart.curve[g], -g))
    assert (
        "α, this reply (accepted / judged, not the acceptance rate): 77.8 %" in panel.summary.text()
    )

    assert panel.what_if.from_measurement.isEnabled()
    panel.what_if.from_measurement.click()
    alpha, gamma, c_draft, c_verify = panel.what_if.current()
    assert (round(alpha, 2), gamma, c_draft, c_verify) == (0.78, 4, 0.10, 1.00)

    panel.show()
    qtbot.waitExposed(panel)
    assert not panel.grab().isNull()  # paints without raising


def test_a_gamma_auto_ran_past_the_fixed_ceiling_has_its_prediction() -> None:
    # Under its confidence stop γ auto asks for up to 24: "current γ 17: predicted —".
    rounds = [round_record(0, 0, 0), *(round_record(i, 17, 15) for i in range(1, 6))]
    insight = analyse(rounds, PLAIN_STEP_S)
    assert insight.current_gamma == 17 and len(insight.curve) == 18
    assert insight.predicted_at_current is not None and insight.predicted_at_current > 1
    wide = [round_record(0, 0, 0), round_record(1, 40, 40)]  # free tokens: no curve that long
    assert len(analyse(wide, PLAIN_STEP_S).curve) == MAX_STOPPED_GAMMA + 1
    assert len(analyse(seed_rounds(), PLAIN_STEP_S).curve) == MAX_GAMMA + 1


def test_useless_draft_reads_as_do_not_speculate(panel: InsightPanel) -> None:
    panel.update_live(useless_rounds())
    insight = panel.insight
    assert insight is not None
    assert insight.alpha == 0.0
    assert insight.best_gamma == 0
    assert all(value < 1.0 for value in insight.curve[1:])
    assert "do not speculate" in panel.summary.text()
    assert panel.table.rowCount() == 0  # the table is the finished reply's, not live


def test_empty_and_plain_only_inputs_show_dashes(panel: InsightPanel, qtbot: QtBot) -> None:
    panel.update_live([])
    assert panel.chart.curve == ()
    assert panel.chart.message == "no speculative rounds yet"
    assert not panel.what_if.from_measurement.isEnabled()
    panel.clear()
    panel.show()
    qtbot.waitExposed(panel)
    assert not panel.grab().isNull()


def test_insight_verify_line_grows_with_rows() -> None:
    # Verification dearer with more rows (1 row: 1.0, 3 rows: 1.2, 5 rows: 1.5 plain steps).
    long = [replace(r, verify_s=1.5 * PLAIN_STEP_S) for r in seed_rounds()]
    short = [
        replace(r, gamma=2, drafted=2, accepted=min(r.accepted, 2), verify_s=1.2 * PLAIN_STEP_S)
        for r in seed_rounds()
    ]
    insight = analyse([*long, *short], PLAIN_STEP_S)
    assert insight.verify is not None
    assert insight.verify.per_row > 0
    assert insight.verify(4) > insight.verify(2)
    assert insight.verify(4) == pytest.approx(1.5, abs=0.1)
    assert set(insight.measured) == {2, 4}


# -- on the real engine -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def runtime(demo_models: Any) -> Iterator[Runtime]:
    with loaded_runtime(
        ModelConfig(str(demo_models.f32), n_ctx=512, n_threads=1),
        ModelConfig(str(demo_models.q4_1), n_ctx=512, n_threads=1),
    ) as rt:
        yield rt


def test_real_reply_feeds_the_panel(panel: InsightPanel, runtime: Runtime) -> None:
    prompt = runtime.chat_prompt([{"role": "user", "content": "Name three colours."}])
    live: list[Any] = []
    result = None
    for event in runtime.generate(prompt, GenerationConfig(max_tokens=16, gamma=fixed(3))):
        if isinstance(event, RoundEvent):
            live.append(event.record)
            panel.update_live(live)
        elif isinstance(event, FinishEvent):
            result = event.result
    assert result is not None
    assert runtime.engine is not None
    assert result.plain_step_s == runtime.engine.plain_step_s
    panel.update_from_result(result)
    assert panel.table.rowCount() == len(result.rounds)
    insight = panel.insight
    assert insight is not None and insight.spec_rounds > 0
    assert insight.alpha is not None and insight.alpha > 0.5  # Q4_1 agrees with F32 mostly
    assert insight.c_draft is not None and insight.c_draft > 0
    assert insight.curve and insight.best_gamma is not None

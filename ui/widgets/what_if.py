"""The Insight panel's what-if sliders: set α, γ, c_draft and c_verify, read E in both of its
forms, the cost of a round, the speedup, target passes per token, the ceiling fraction and the
best γ (the figures come from app.metrics.insight_text)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QLabel,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from app.metrics.cost_model import MAX_GAMMA
from app.metrics.insight_text import WHAT_IF_DEFAULTS, what_if_figures
from app.metrics.summary import METRIC_DEFINITIONS
from ui.named_widgets import named_label, push_button


def _slider(name: str, maximum: int, value: int, tip: str) -> QSlider:
    slider = QSlider(Qt.Orientation.Horizontal)
    slider.setObjectName(name)
    slider.setRange(0, maximum)
    slider.setValue(value)
    slider.setToolTip(tip)
    return slider


class WhatIf(QGroupBox):
    """What-if sliders: set α, γ and the two costs, read E, cost, speedup and the ceiling."""

    # Slider steps: α and costs in hundredths, γ in whole tokens (γ up to 32, where the
    # cost model's sweep ends).
    SCALE = 100

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("What if… (the cost model)", parent)
        self.setObjectName("whatIfGroup")
        d = WHAT_IF_DEFAULTS
        s = self.SCALE
        # A quantity with a definition shows it word for word; γ here is a setting (the draft
        # length), not the measured mean that METRIC_DEFINITIONS["gamma"] defines.
        m = METRIC_DEFINITIONS
        self.alpha = _slider("whatIfAlpha", s, round(d["alpha"] * s), f"α: {m['alpha']}")
        self.gamma = _slider(
            "whatIfGamma", MAX_GAMMA, int(d["gamma"]), "γ: draft tokens proposed per round"
        )
        self.c_draft = _slider(
            "whatIfDraftCost", s, round(d["c_draft"] * s), f"c_draft: {m['c_draft']}"
        )
        self.c_verify = _slider(
            "whatIfVerifyCost",
            3 * s,
            round(d["c_verify"] * s),
            f"c_verify: {m['c_verify']}. 1 is the idealisation.",
        )
        self.c_verify.setMinimum(s // 10)  # a verification pass cannot be free
        self.values = {key: QLabel() for key in ("alpha", "gamma", "c_draft", "c_verify")}
        # Long formulas wrap in a narrow panel instead of clipping.
        self.expected = named_label("whatIfExpected", wrap=True)
        self.cost = named_label("whatIfCost", wrap=True)
        self.speedup = named_label("whatIfSpeedup", wrap=True)
        self.passes = named_label("whatIfPassesPerToken")
        self.ceiling = named_label("whatIfCeiling")
        self.best = named_label("whatIfBestGamma", wrap=True)
        self.from_measurement = push_button(
            "Use measured",
            "whatIfFromMeasurement",
            "Set the sliders to the last reply's measured values",
        )
        self.from_measurement.setEnabled(False)
        self.reset = push_button(
            "Reference point",
            "whatIfReset",
            "Back to the cost model's reference point: α 0.80, γ 4, c_draft 0.10, c_verify 1.00",
        )

        grid = QGridLayout()
        for row, (label, slider, key) in enumerate(
            [
                ("α", self.alpha, "alpha"),
                ("γ", self.gamma, "gamma"),
                ("c_draft", self.c_draft, "c_draft"),
                ("c_verify", self.c_verify, "c_verify"),
            ]
        ):
            caption = QLabel(label)
            # Without a buddy a screen reader names every slider after the group's title.
            caption.setBuddy(slider)
            grid.addWidget(caption, row, 0)
            grid.addWidget(slider, row, 1)
            self.values[key].setMinimumWidth(40)
            grid.addWidget(self.values[key], row, 2)
            slider.valueChanged.connect(self.recompute)
        form = QFormLayout()
        # Narrow: a name above its value rather than a value squeezed off the right edge.
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.addRow("E (tokens per round)", self.expected)
        form.addRow("cost per round", self.cost)
        form.addRow("speedup", self.speedup)
        form.addRow("target passes per token", self.passes)
        form.addRow("ceiling reached", self.ceiling)
        form.addRow("best γ", self.best)
        layout = QVBoxLayout(self)
        layout.addLayout(grid)
        layout.addLayout(form)
        buttons = QGridLayout()
        buttons.addWidget(self.from_measurement, 0, 0)
        buttons.addWidget(self.reset, 0, 1)
        layout.addLayout(buttons)
        self.reset.clicked.connect(self.set_defaults)
        self.recompute()

    def set_values(self, alpha: float, gamma: int, c_draft: float, c_verify: float) -> None:
        s = self.SCALE
        for slider, value in (
            (self.alpha, round(alpha * s)),
            (self.gamma, gamma),
            (self.c_draft, round(c_draft * s)),
            (self.c_verify, round(c_verify * s)),
        ):
            slider.blockSignals(True)
            slider.setValue(value)
            slider.blockSignals(False)
        self.recompute()

    def set_defaults(self) -> None:
        d = WHAT_IF_DEFAULTS
        self.set_values(d["alpha"], int(d["gamma"]), d["c_draft"], d["c_verify"])

    def current(self) -> tuple[float, int, float, float]:
        s = self.SCALE
        return (
            self.alpha.value() / s,
            self.gamma.value(),
            self.c_draft.value() / s,
            self.c_verify.value() / s,
        )

    def recompute(self) -> None:
        alpha, gamma, c_draft, c_verify = self.current()
        self.values["alpha"].setText(f"{alpha:.2f}")
        self.values["gamma"].setText(str(gamma))
        self.values["c_draft"].setText(f"{c_draft:.2f}")
        self.values["c_verify"].setText(f"{c_verify:.2f}")
        figures = what_if_figures(alpha, gamma, c_draft, c_verify)
        self.expected.setText(figures["expected"])
        self.expected.setToolTip(figures["expected_tip"])
        self.cost.setText(figures["cost"])
        self.speedup.setText(figures["speedup"])
        self.passes.setText(figures["passes"])
        self.ceiling.setText(figures["ceiling"])
        self.best.setText(figures["best"])

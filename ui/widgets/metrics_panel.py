"""The panel beside the conversation: live speculation figures and memory.

It only displays what it is given; the window decides when (a timer a few times a second while
generating). Every figure's tooltip is its definition from app.metrics.summary.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import (
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from app.llama.facts import MemoryUsage
from app.llama.resources import GpuMemory, format_bytes
from app.llama.rpc import WorkerMemory
from app.metrics.summary import METRIC_DEFINITIONS, GenerationStats
from ui import formatting as fmt
from ui.widgets.charts import ACCEPT_COLOR, RATE_COLOR, PositionBars, Sparkline
from ui.widgets.live_metrics import Sample


def _value_label(name: str, tooltip: str) -> QLabel:
    label = QLabel(fmt.DASH)
    label.setObjectName(name)
    label.setToolTip(tooltip)
    # A long value wraps inside the side panel, which never scrolls sideways; unwrapped, one
    # line ("chat history: no model, ...") widened the panel past a 1280-wide window's edge.
    label.setWordWrap(True)
    return label


class MetricsPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("metricsPanel")
        d = METRIC_DEFINITIONS
        self.acceptance = _value_label(
            "acceptanceRateLabel",
            f"Acceptance rate: {d['acceptance_rate']}. The Insight tab's α is another "
            f"figure: {d['alpha']}.",
        )
        self.accepted_per_round = _value_label(
            "acceptedPerRoundLabel", f"Accepted per round: {d['accepted_per_round']}"
        )
        self.tokens_per_second = _value_label(
            "tokensPerSecondLabel", f"Tokens per second: {d['tokens_per_second']}"
        )
        self.ttft = _value_label("ttftLabel", f"Time to first token: {d['ttft_s']}")
        self.draft_verify = _value_label(
            "draftVerifyLabel", f"Drafting: {d['draft_s']}.\nVerifying: {d['verify_s']}."
        )
        self.bars = PositionBars()
        self.bars.setObjectName("positionBars")
        self.sparkline = Sparkline()
        self.sparkline.setObjectName("sparkline")
        self.sparkline.setToolTip(
            "Over this reply: tokens/s in the last second (blue, scaled to its peak) and "
            "acceptance over the last 8 rounds (green, 0–100 %)."
        )

        reply_box = QGroupBox("This reply")
        form = QFormLayout(reply_box)
        form.addRow(self._caption("Acceptance rate", self.acceptance), self.acceptance)
        form.addRow(
            self._caption("Accepted / round", self.accepted_per_round), self.accepted_per_round
        )
        form.addRow(self._caption("Tokens / s", self.tokens_per_second), self.tokens_per_second)
        form.addRow(self._caption("First token", self.ttft), self.ttft)
        form.addRow(self._caption("Draft vs verify", self.draft_verify), self.draft_verify)
        form.addRow(QLabel("Acceptance by draft position"))
        form.addRow(self.bars)
        legend = QHBoxLayout()
        legend.addWidget(self._legend("tokens/s", RATE_COLOR.name()))
        legend.addWidget(self._legend("acceptance", ACCEPT_COLOR.name()))
        legend.addStretch(1)
        form.addRow(legend)
        form.addRow(self.sparkline)

        self.memory = _value_label(
            "memoryLabel",
            "GPU memory used / total (NVIDIA, via NVML), or the process's resident RAM when "
            "there is no NVIDIA GPU.",
        )
        self.memory.setWordWrap(True)
        self.target_memory = _value_label(
            "targetMemoryLabel", "Target model: weights and KV cache (f16, full context)."
        )
        self.saved_memory = _value_label(
            "savedChatsMemoryLabel",
            "Earlier conversations' cache states the target keeps in RAM, so that going back to "
            "one does not read it again (Settings, Chat cache).",
        )
        self.draft_memory = _value_label(
            "draftMemoryLabel",
            "Draft model: weights and KV cache: the memory that speculation costs.",
        )
        self.workers_memory = _value_label(
            "workersMemoryLabel",
            "Each RPC worker's free / total memory, as the worker reported it after the models "
            "loaded.",
        )
        self.workers_memory.setWordWrap(True)
        memory_box = QGroupBox("Memory")
        memory_form = QFormLayout(memory_box)
        memory_form.addRow(self.memory)
        memory_form.addRow(self.workers_memory)
        self.workers_memory.hide()
        memory_form.addRow("Target", self.target_memory)
        memory_form.addRow("Chat cache", self.saved_memory)
        memory_form.addRow("Draft", self.draft_memory)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(reply_box)
        layout.addWidget(memory_box)
        # What show_stats last showed, for set_speculation(True) to show again.
        self._shown: tuple[GenerationStats, bool] | None = None

    @staticmethod
    def _caption(text: str, value: QLabel) -> QLabel:
        caption = QLabel(text)
        caption.setToolTip(value.toolTip())
        caption.setBuddy(value)
        return caption

    @staticmethod
    def _legend(text: str, color: str) -> QLabel:
        label = QLabel(f'<span style="color:{color}">━</span> {text}')
        return label

    # -- figures ------------------------------------------------------------------------------

    def set_speculation(self, on: bool) -> None:
        """Off: the acceptance figures read "—" at once, never a stale number. On: the last
        figures shown are shown again as they came (a finished reply's are its own)."""
        if on and self._shown is not None:
            stats, speculative = self._shown
            self.show_stats(stats, speculative=speculative)
        elif not on:
            self.acceptance.setText(fmt.DASH)
            self.accepted_per_round.setText(fmt.DASH)

    def show_stats(self, stats: GenerationStats, *, speculative: bool) -> None:
        """speculative: whether the reply these figures measure drafted, as its stats line
        says; a reply that switched speculation off mid-way still has its acceptance."""
        self._shown = (stats, speculative)
        self.acceptance.setText(fmt.percent(stats.acceptance_rate) if speculative else fmt.DASH)
        self.accepted_per_round.setText(
            fmt.number(stats.accepted_per_round) if speculative else fmt.DASH
        )
        self.tokens_per_second.setText(fmt.rate(stats.tokens_per_second))
        self.ttft.setText(fmt.seconds(stats.ttft_s))
        self.draft_verify.setText(
            f"{fmt.seconds(stats.draft_s)} / {fmt.seconds(stats.verify_s)}"
            if stats.rounds
            else fmt.DASH
        )
        self.bars.set_values(stats.per_position_acceptance if speculative else [])

    def show_samples(self, samples: Sequence[Sample]) -> None:
        self.sparkline.set_series(
            [s.tokens_per_second for s in samples], [s.acceptance for s in samples]
        )

    def clear(self) -> None:
        self._shown = None
        for label in (
            self.acceptance,
            self.accepted_per_round,
            self.tokens_per_second,
            self.ttft,
            self.draft_verify,
        ):
            label.setText(fmt.DASH)
        self.bars.set_values([])
        self.sparkline.set_series([], [])

    def show_memory(
        self,
        gpu: GpuMemory | None,
        ram_bytes: int,
        usage: MemoryUsage,
        draft_kind: str,
        workers: Sequence[WorkerMemory] = (),
    ) -> None:
        if gpu is None:
            self.memory.setText(f"No GPU · process RAM {format_bytes(ram_bytes)}")
        else:
            self.memory.setText(
                f"VRAM {format_bytes(gpu.used_bytes)} / {format_bytes(gpu.total_bytes)} "
                f"({gpu.name}) · process RAM {format_bytes(ram_bytes)}"
            )
        self.workers_memory.setVisible(bool(workers))
        self.workers_memory.setText(
            "\n".join(
                f"Worker {w.endpoint} ({w.device}): {format_bytes(w.free_bytes)} free / "
                f"{format_bytes(w.total_bytes)}"
                for w in workers
            )
        )
        self.target_memory.setText(
            _held(usage.target_weights, usage.target_kv) if usage.target_weights else "not loaded"
        )
        saved = usage.target_saved
        self.saved_memory.setText(format_bytes(saved) if saved else "none")
        if draft_kind == "model":
            self.draft_memory.setText(_held(usage.draft_weights, usage.draft_kv))
        elif draft_kind == "ngram":
            self.draft_memory.setText("chat history: no model, no extra memory")
        else:
            self.draft_memory.setText("none")


def _held(weights: int, kv: int) -> str:
    # A wrapped line breaks between the two figures, never inside one ("90.0 | MiB").
    weights_text, kv_text = (format_bytes(n).replace(" ", "\u00a0") for n in (weights, kv))
    return f"weights {weights_text} · KV {kv_text}"

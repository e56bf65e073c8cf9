"""The window's widgets on scripted data (no model needed)."""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QFormLayout, QLabel
from pytestqt.qtbot import QtBot

from app.llama.facts import MemoryUsage
from app.llama.resources import GpuMemory
from app.metrics.summary import METRIC_DEFINITIONS, summarize
from app.store import ConversationSummary
from ui.settings import DRAFT_NGRAM, DRAFT_NONE
from ui.widgets.charts import PositionBars, Sparkline
from ui.widgets.conversation_list import ConversationList
from ui.widgets.conversation_view import ConversationView, ViewMessage
from ui.widgets.metrics_panel import MetricsPanel
from ui.widgets.model_controls import NGRAM_LABEL, NONE_LABEL, ModelControls
from ui.widgets.prompt_input import PromptInput
from ui.workers.catalog import Catalog, DraftOption, ModelFile

from .test_live_metrics import record


def test_enter_sends_and_shift_enter_adds_a_line(qtbot: QtBot) -> None:
    box = PromptInput()
    qtbot.addWidget(box)
    assert box.objectName() == "promptInput"
    qtbot.keyClicks(box, "first")
    with qtbot.assertNotEmitted(box.submitted):
        qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(box, "second")
    assert box.toPlainText() == "first\nsecond"
    with qtbot.waitSignal(box.submitted, timeout=1000):
        qtbot.keyClick(box, Qt.Key.Key_Return)
    assert box.toPlainText() == "first\nsecond"  # the window decides what to do with it


def test_view_streams_a_reply_then_shows_it_with_its_stats(qtbot: QtBot) -> None:
    view = ConversationView()
    qtbot.addWidget(view)
    view.set_messages([ViewMessage("user", "Say hi <please>")])
    view.begin_reply()
    for text, draft in [("Hello", False), (" there", True), (", **friend**", True)]:
        view.append_token(text, draft)
    assert view.streaming_text == "Hello there, **friend**"
    qtbot.waitUntil(lambda: "friend" in view.toPlainText(), timeout=2000)
    assert "**" not in view.toPlainText()  # rendered as Markdown while streaming
    finished = view.finish_reply("Hello there, **friend**", "mode draft · γ 5")
    assert finished is not None
    assert finished.segments == [("Hello", False), (" there, **friend**", True)]
    text = view.toPlainText()
    assert "Say hi <please>" in text and "mode draft · γ 5" in text
    assert text.index("You") < text.index("Say hi") < text.index("Assistant") < text.index("Hello")
    assert view.streaming_text == ""
    html = view.toHtml()
    assert view.mark_style.split(":")[1].strip(" ;") in html  # the draft run is highlighted
    view.set_highlight(False)
    assert view.mark_style.split(":")[1].strip(" ;") not in view.toHtml()
    view.drop_last_reply()
    assert [m.role for m in view.messages] == ["user"]


def _code_block_lines(view: ConversationView) -> list[str]:
    """The text of every block the document lays out as code (fixed-pitch, no wrapping)."""
    lines = []
    block = view.document().begin()
    while block.isValid():
        if block.blockFormat().nonBreakableLines() and block.text().strip():
            lines.append(block.text())
        block = block.next()
    return lines


def test_a_reply_that_starts_with_code_streams_as_it_reopens(qtbot: QtBot) -> None:
    reply = "```python\nprint('first')\nprint('second')\n```\nDone."
    view = ConversationView()
    qtbot.addWidget(view)
    view.set_messages([ViewMessage("user", "code please")])
    view.begin_reply()
    for piece in ("```python\n", "print('first')\n", "print('second')\n", "```\nDone."):
        view.append_token(piece, False)
    qtbot.waitUntil(lambda: "Done." in view.toPlainText(), timeout=2000)
    assert _code_block_lines(view) == ["print('first')", "print('second')"]
    view.finish_reply(reply, "stats")
    reopened = ConversationView()
    qtbot.addWidget(reopened)
    reopened.set_messages(view.messages)
    assert (
        _code_block_lines(view)
        == _code_block_lines(reopened)
        == [
            "print('first')",
            "print('second')",
        ]
    )
    assert view.toPlainText() == reopened.toPlainText()


def test_view_follows_a_palette_change(qtbot: QtBot) -> None:
    view = ConversationView()
    qtbot.addWidget(view)
    view.set_messages([ViewMessage("assistant", "x", [("x", True)], "")])
    light = view.mark_style
    dark = QPalette(view.palette())
    dark.setColor(QPalette.ColorRole.Base, QColor(25, 25, 28))
    dark.setColor(QPalette.ColorRole.Text, QColor(230, 230, 230))
    view.setPalette(dark)
    assert view.mark_style != light
    assert view.mark_style.split(":")[1].strip(" ;") in view.toHtml()


def test_metrics_panel_labels_and_definitions(qtbot: QtBot) -> None:
    panel = MetricsPanel()
    qtbot.addWidget(panel)
    assert panel.acceptance.objectName() == "acceptanceRateLabel"
    assert panel.tokens_per_second.objectName() == "tokensPerSecondLabel"
    assert panel.memory.objectName() == "memoryLabel"
    assert METRIC_DEFINITIONS["acceptance_rate"] in panel.acceptance.toolTip()
    stats = summarize(
        [record(0, 0, 0), record(1, 4, 3)],
        prompt_tokens=10,
        generated_tokens=6,  # the first, drawn from the prompt's pass, then the rounds' five
        prompt_s=0.1,
        generation_s=0.5,
        ttft_s=0.12,
        plain_step_s=0.02,
    )
    panel.show_stats(stats, speculative=True)
    assert panel.acceptance.text() == "75.0 %"
    assert panel.tokens_per_second.text() == "10.0 tok/s"
    assert panel.ttft.text() == "120 ms"
    assert panel.bars.values == [1.0, 1.0, 1.0, 0.0]
    panel.set_speculation(False)
    assert panel.acceptance.text() == "—" and panel.accepted_per_round.text() == "—"
    panel.set_speculation(True)  # the figures shown are a reply's: they come back
    assert panel.acceptance.text() == "75.0 %"
    panel.set_speculation(False)
    # A reply that drafted (speculation switched off mid-way) keeps its own figures.
    panel.show_stats(stats, speculative=True)
    assert panel.acceptance.text() == "75.0 %"
    panel.show_stats(stats, speculative=False)
    assert panel.acceptance.text() == "—" and panel.bars.values == []
    panel.clear()
    panel.set_speculation(True)
    assert panel.acceptance.text() == "—"


def test_memory_readout_with_and_without_a_gpu(qtbot: QtBot) -> None:
    panel = MetricsPanel()
    qtbot.addWidget(panel)
    usage = MemoryUsage(500 * 2**20, 90 * 2**20, 92 * 2**20, 45 * 2**20, 30, 30)
    panel.show_memory(None, 900 * 2**20, usage, "model")
    assert panel.memory.text() == "No GPU · process RAM 900.0 MiB"
    # Non-breaking spaces keep each figure whole where the line wraps.
    assert panel.target_memory.text() == "weights 500.0\u00a0MiB · KV 90.0\u00a0MiB"
    assert panel.saved_memory.text() == "none"
    assert panel.draft_memory.text() == "weights 92.0\u00a0MiB · KV 45.0\u00a0MiB"
    panel.show_memory(GpuMemory("RTX", 3 * 2**30, 24 * 2**30), 2**30, usage, "ngram")
    assert panel.memory.text().startswith("VRAM 3.0 GiB / 24.0 GiB (RTX)")
    assert "no extra memory" in panel.draft_memory.text()
    saved = dataclasses.replace(usage, target_saved=7 * 2**20)
    panel.show_memory(None, 2**30, saved, "model")
    assert panel.saved_memory.text() == "7.0 MiB"
    # Named apart from the chats the history keeps: these are cache states, dropped freely.
    form = panel.saved_memory.parentWidget().layout()
    assert isinstance(form, QFormLayout)
    label = form.labelForField(panel.saved_memory)
    assert isinstance(label, QLabel) and label.text() == "Chat cache"


def test_charts_paint_their_data(qtbot: QtBot) -> None:
    spark, bars = Sparkline(), PositionBars()
    for widget in (spark, bars):
        qtbot.addWidget(widget)
        widget.resize(200, 60)
    spark.set_series([None, 10.0, 30.0, 20.0], [None, 0.5, 0.9, None])
    bars.set_values([1.0, 0.5, None])
    assert spark.point_count == 4
    assert "2: 50%" in bars.toolTip() and "3: —" in bars.toolTip()
    for widget in (spark, bars):
        image = widget.grab().toImage()
        colours = {image.pixel(x, y) for x in range(0, 200, 3) for y in range(0, 60, 3)}
        assert len(colours) > 2  # something was drawn beyond the background and the axis


def catalog() -> Catalog:
    target = ModelFile("/m/big.gguf", 500 * 2**20, "F32", "Big", "llama", "fp")
    drafts = [
        DraftOption("/m/small.gguf", 90 * 2**20, "Q4_0", True, "compatible", "compatible, 18%"),
        DraftOption("/m/mid.gguf", 140 * 2**20, "Q8_0", True, "compatible", "compatible, 27%"),
        DraftOption("/m/other.gguf", 250 * 2**20, "Q4_K_M", False, "vocab sizes differ", "x"),
    ]
    return Catalog([target], [], target, drafts)


def test_model_controls_offer_drafts_with_reasons(qtbot: QtBot) -> None:
    controls = ModelControls()
    qtbot.addWidget(controls)
    controls.set_catalog(catalog(), "/m/big.gguf", "/m/mid.gguf")
    entries = controls.draft_entries()
    assert [e[1] for e in entries] == [
        "/m/small.gguf",
        "/m/mid.gguf",
        "/m/other.gguf",
        DRAFT_NGRAM,
        DRAFT_NONE,
    ]
    assert "90.0 MiB" in entries[0][0]
    assert entries[2][2] is False
    assert entries[2][3] == "Not compatible with the target: vocab sizes differ."
    assert [e[0] for e in entries[3:]] == [NGRAM_LABEL, NONE_LABEL]
    assert controls.draft_combo.currentIndex() == 1
    # Size and type first, so a narrow dropdown never cuts them; then the name.
    assert controls.target_combo.currentText().endswith(" · big")
    assert controls.target_combo.currentText().split(" · ")[0].endswith("iB")
    with qtbot.waitSignal(controls.draftChosen) as chosen:
        controls.draft_combo.activated.emit(3)
    assert chosen.args == [DRAFT_NGRAM]
    assert controls.gamma.objectName() == "gammaControl"
    controls.gamma.setValue(0)
    assert controls.gamma.text() == "Auto"


def test_conversation_list_rename_and_delete(qtbot: QtBot) -> None:
    widget = ConversationList()
    qtbot.addWidget(widget)
    widget.set_conversations(
        [ConversationSummary(2, "Second", 0, 2, 4), ConversationSummary(1, "First", 0, 1, 2)], 1
    )
    assert widget.titles() == ["Second", "First"] and widget.current_id() == 1
    with qtbot.waitSignal(widget.conversationChosen) as chosen:
        widget.list.setCurrentRow(0)
    assert chosen.args == [2]
    with qtbot.waitSignal(widget.renameRequested) as renamed:
        widget.list.item(0).setText("Renamed")
    assert renamed.args == [2, "Renamed"]
    widget.list.setFocus()
    with qtbot.waitSignal(widget.deleteRequested) as deleted:
        widget.list.actions()[0].trigger()
    assert deleted.args == [2]


def test_copies_of_one_file_in_two_folders_are_told_apart(qtbot: QtBot) -> None:
    size = 90 * 2**20
    hub = "/home/u/.cache/huggingface/hub/models--a--b/snapshots/1/small.gguf"
    lmstudio = "/home/u/.lmstudio/models/a/b/small.gguf"
    target = ModelFile("/m/big.gguf", 500 * 2**20, "F32", "Big", "llama", "fp")
    drafts = [
        DraftOption(hub, size, "Q4_0", True, "compatible", "compatible, 18%"),
        DraftOption(lmstudio, size, "Q4_0", True, "compatible", "compatible, 18%"),
        DraftOption("/x/1/small.gguf", size, "Q4_0", True, "compatible", "compatible, 18%"),
        DraftOption("/y/1/small.gguf", size, "Q4_0", True, "compatible", "compatible, 18%"),
        DraftOption("/m/mid.gguf", 140 * 2**20, "Q8_0", True, "compatible", "compatible, 27%"),
    ]
    controls = ModelControls()
    qtbot.addWidget(controls)
    controls.set_catalog(Catalog([target], [], target, drafts), "/m/big.gguf", hub)

    labels = [label for label, *_ in controls.draft_entries()[:5]]
    assert len(set(labels)) == 5
    assert labels[0].endswith(" · in snapshots/1") and labels[1].endswith(" · in a/b")
    assert labels[2].endswith(" · in x/1") and labels[3].endswith(" · in y/1")
    assert labels[4] == "140.0 MiB · Q8_0 · mid"  # a label no other shares stays short

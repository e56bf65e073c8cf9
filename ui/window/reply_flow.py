"""One reply from request to saved message: the request to the engine worker, the stream into
the view and the live panel, the mid-reply toggles, and the end (saved, or failed in words).

The window owns the state machine; this says when a reply started and ended (signals), and
does everything in between. Worker signals arrive queued, on the UI thread.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.events import TokenEvent
from app.engine.model_host import DraftSetting
from app.engine.result import GenerationResult
from app.llama.config import ModelConfig
from app.metrics.rounds import RoundRecord
from app.metrics.summary import GenerationStats
from app.store import TokenSource
from app.store_errors import StoreError
from ui.formatting import (
    AUTO_DID_NOT_DRAFT,
    DRAFT_PAUSED,
    NO_DRAFT_IN_USE,
    SPECULATION_OFF,
    speedup_headline,
    stats_line,
    too_short_headline,
)
from ui.widgets.conversation_view import ConversationView, ViewMessage
from ui.widgets.insight_panel import InsightPanel
from ui.widgets.live_metrics import LiveReply
from ui.widgets.metrics_panel import MetricsPanel
from ui.window.chat_controller import ChatController
from ui.window.generation_settings import regenerate_sampling
from ui.window.reply import ReplyInProgress
from ui.window.speed_reference import MIN_JUDGED_ROUNDS, PlainSpeed, Speedup
from ui.workers.engine_host import EngineHost
from ui.workers.requests import GenerateRequest, GenerationFailure

STOPPED_BEFORE_TEXT = "Stopped before any text was written."


class ReplyFlow(QObject):
    """Signals:
    started(): a reply was requested. ended(): it finished or failed (emitted first).
    finished(dict): the stats stored with the reply. failed(str): why it failed, in words.
    noticed(str): a passing note from the engine. headline(str, str): text and tooltip.
    saveFailed(Exception): the reply is shown but could not be stored.
    tooLong(): a reply failed before any text because the chat no longer fits the context
    (emitted before failed), so the message just sent can come back to the box.
    unanswered(): a reply to a message just sent was stopped before any text (emitted before
    finished), so the message can come back to the box to edit or send again.
    """

    started = Signal()
    ended = Signal()
    finished = Signal(dict)
    failed = Signal(str)
    noticed = Signal(str)
    headline = Signal(str, str)
    saveFailed = Signal(object)
    tooLong = Signal()
    unanswered = Signal()

    def __init__(
        self,
        *,
        host: EngineHost,
        chat: ChatController,
        view: ConversationView,
        metrics: MetricsPanel,
        insight: InsightPanel,
        timer: QTimer,
        clock: Callable[[], float] = time.perf_counter,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._host = host
        self._chat = chat
        self._view = view
        self._metrics = metrics
        self._insight = insight
        self._timer = timer
        self.live = LiveReply(clock=clock)
        self.control: GenerationControl | None = None
        self.reply: ReplyInProgress | None = None
        self.last_result: GenerationResult | None = None
        # The regenerated reply as the view showed it, shown again if the new one writes nothing.
        self._replaced: ViewMessage | None = None
        self._replaced_id: int | None = None
        self._closing = False
        # The last measured plain target step: the live headline's unit until this reply
        # measures its own.
        self._plain_step_s: float | None = None
        self._speculation_on = True
        self._target: ModelConfig | None = None
        self._exact = False
        self.plain_speed = PlainSpeed()
        self._request_ids = itertools.count(1)
        worker = host.worker
        queued = Qt.ConnectionType.QueuedConnection
        # Every worker→window connection is queued: the worker's thread must never run UI code.
        worker.tokenReceived.connect(self._on_token, queued)
        worker.roundReceived.connect(self._on_round, queued)
        worker.noticeReceived.connect(self.noticed, queued)
        worker.generationFinished.connect(self._on_finished, queued)
        worker.generationFailed.connect(self._on_failed, queued)
        timer.timeout.connect(self._refresh_live)

    @property
    def active(self) -> bool:
        return self.reply is not None

    def start(
        self,
        draft: DraftSetting,
        config: GenerationConfig,
        *,
        speculation: bool,
        replacing: int | None = None,
    ) -> None:
        """replacing: the stored reply to regenerate; it stays stored (and comes back into
        view) unless the new reply writes something."""
        conversation_id = self._chat.conversation_id
        assert conversation_id is not None and self.reply is None
        variation = None
        if replacing is not None:
            sampling, variation = regenerate_sampling(config.sampling)
            config = replace(config, sampling=sampling)
        control = GenerationControl(speculative=speculation)
        request = GenerateRequest(
            request_id=next(self._request_ids),
            messages=self._chat.history(without=replacing),
            config=config,
            control=control,  # the toggle acts through control.speculative, even mid-reply
        )
        self.control = control
        self._closing = False
        self.reply = ReplyInProgress(
            request_id=request.request_id,
            conversation_id=conversation_id,
            drafter_kind=draft.kind,
            drafter_label=_draft_label(draft),
            gamma_label="Auto" if config.gamma.is_auto else str(config.gamma),
            speculation_at_start=speculation,
            exact=config.exact,
            variation=variation,
            replaces=replacing,
        )
        self._replaced = self._view.drop_last_reply() if replacing is not None else None
        self._replaced_id = replacing
        speculative = speculation and draft.kind != "none"
        self._speculation_on = speculation
        self.live.start(config.gamma.start if speculative else 0)
        self._metrics.clear()
        self._insight.clear()
        self._metrics.set_speculation(speculative)
        self._view.begin_reply()
        self.started.emit()
        self._timer.start()
        self._host.request_generate(request)

    def stop(self, *, closing: bool = False) -> bool:
        """Ask the engine to stop after its current round; False when nothing runs.
        closing: the window is closing, not the user stopping this reply: a regenerated
        reply cut by it does not take the complete earlier reply's place."""
        if self.control is None:
            return False
        if closing and self.control.stop_requested:
            return True  # the user stopped it first: the partial reply replaces, as they meant
        self._closing = closing
        self.control.stop()
        return True

    def set_speculation(self, on: bool, *, draft_loaded: bool) -> None:
        self._speculation_on = on
        if self.control is not None:
            self.control.speculative = on  # read by the engine before its next round
        if self.reply is not None:
            self.reply.on_toggle(on)
        self._metrics.set_speculation(on and draft_loaded)

    def set_gamma(self, value: int) -> None:
        """γ for the rest of the reply: a number from the next round, 0 = Auto."""
        if self.control is not None:
            self.control.gamma = value if value > 0 else None
        if self.reply is not None:
            self.reply.on_gamma(str(value) if value > 0 else "Auto")

    # -- the stream ---------------------------------------------------------------------------

    def _on_token(self, event: TokenEvent) -> None:
        if self.reply is None:
            return
        self.live.on_token()
        self._view.append_token(event.text, TokenSource.of(event.from_draft, event.from_suffix))

    def _on_round(self, record: RoundRecord) -> None:
        if self.reply is None:
            return
        self.live.on_round(record)
        if record.drafted == 0 and record.verify_s > 0 and self._plain_step_s is None:
            self._plain_step_s = record.verify_s

    def _refresh_live(self) -> None:
        if self.reply is None:
            return
        read = self.control.prompt_read if self.control is not None else None
        if read is not None:
            # A long prompt is read for seconds (minutes on a big model) before any text.
            done, total = read
            self._view.show_waiting(f"Reading the prompt… {done * 100 // total} %")
        self.live.sample()
        stats = self.live.stats()
        speculative = self._speculation_on and self.reply.drafter_kind != "none"
        self._metrics.show_stats(stats, speculative=speculative)
        self._metrics.show_samples(self.live.samples)
        self._insight.update_live(self.live.rounds)
        if stats.rounds >= MIN_JUDGED_ROUNDS:
            self._show_headline(self._speedup(stats), speculative, self.reply.gammas_label)

    def _speedup(self, stats: GenerationStats) -> Speedup | None:
        exact = self.reply.exact if self.reply else self._exact
        return self.plain_speed.speedup(self._target, exact, stats, self._plain_step_s)

    @staticmethod
    def _plain_because(reply: ReplyInProgress) -> str:
        """Why a finished reply that did not speculate ran plain."""
        if reply.drafter_kind == "none":
            return NO_DRAFT_IN_USE
        if not reply.speculation_ever_on or reply.gamma_label == "off":
            return SPECULATION_OFF
        return AUTO_DID_NOT_DRAFT if reply.gamma_label == "Auto" else DRAFT_PAUSED

    def _show_headline(
        self,
        speedup: Speedup | None,
        speculative: bool,
        gammas: str,
        *,
        plain_because: str = NO_DRAFT_IN_USE,
    ) -> None:
        text, tooltip = speedup_headline(
            speedup.value if speedup else None,
            speculative=speculative,
            measured=speedup.measured if speedup else True,
            tooltip=speedup.tooltip if speedup else "",
            gamma_auto=gammas.endswith("Auto"),
            plain_because=plain_because,
        )
        if text:  # until this reply has a figure, the last one stays
            self.headline.emit(text, tooltip)

    def _on_finished(self, result: GenerationResult) -> None:
        reply = self.reply
        if reply is None:
            return
        self._end()
        if result.finish_reason == "cancelled" and not result.token_ids:
            self._stopped_before_text(regenerating=reply.replaces is not None)
            return
        if result.finish_reason == "cancelled" and self._closing and reply.replaces is not None:
            return  # the earlier reply stays stored; the window is going
        self.last_result = result
        self._plain_step_s = result.plain_step_s or self._plain_step_s
        self._exact = reply.exact
        speedup = self._speedup(result.stats)
        stats = reply.stats(result, speedup=speedup)
        if stats["mode"] == "plain" and not stats["switched"] and self._target:
            self.plain_speed.note(
                self._target,
                reply.exact,
                result.stats.tokens_per_second,
                result.stats.generated_tokens,
            )
        shown = self._view.finish_reply(result.text, stats_line(stats))
        segments = shown.segments if shown else None
        try:
            self._chat.save_reply(
                reply.conversation_id, result.text, stats, segments, replaces=reply.replaces
            )
        except (StoreError, OSError) as exc:  # shown in words by the window
            self.saveFailed.emit(exc)
        self.live.sample()
        speculative = stats["mode"] != "plain"
        self._metrics.show_stats(result.stats, speculative=speculative)
        self._metrics.show_samples(self.live.samples)
        self._insight.update_from_result(result)
        if speculative and result.stats.rounds < MIN_JUDGED_ROUNDS:
            # Otherwise the last reply's figure would stay, read as this one's.
            self.headline.emit(
                *too_short_headline(
                    result.stats.generated_tokens, result.stats.rounds, MIN_JUDGED_ROUNDS
                )
            )
        else:
            self._show_headline(
                speedup, speculative, reply.gammas_label, plain_because=self._plain_because(reply)
            )
        self.finished.emit(stats)

    def _stopped_before_text(self, *, regenerating: bool) -> None:
        """Stopped before the first token: nothing to save, no figures to show, and a
        regenerated reply's predecessor back. The headline keeps speaking of the last reply
        that wrote something."""
        self._view.finish_reply("", "", note=STOPPED_BEFORE_TEXT)
        self._put_back_replaced()
        self._metrics.clear()
        self._insight.clear()
        self.noticed.emit(STOPPED_BEFORE_TEXT)
        if not regenerating:
            self.unanswered.emit()
        self.finished.emit({"finish_reason": "cancelled", "generated_tokens": 0, "saved": False})

    def models_changed(self, target: ModelConfig | None) -> None:
        """Models loaded: the plain-step unit was the old target's, or of the same file loaded
        with other threads, GPU layers or workers; the headline spoke of the last ones."""
        if target != self._target:
            self._target = target
            self._plain_step_s = None
            self._insight.forget_plain_step()
        self.headline.emit("", "")

    def _on_failed(self, failure: GenerationFailure) -> None:
        reply = self.reply
        if reply is None:
            return
        self._end()
        if failure.cancelled:
            self._stopped_before_text(regenerating=reply.replaces is not None)
            return
        shown = self._view.finish_reply("", "", note=failure.message)
        if reply.replaces is not None:
            # A regenerated reply that failed, even after some text, does not take the
            # complete earlier reply's place: that one comes back.
            self._put_back_replaced()
            self.failed.emit(f"{failure.message} (the earlier reply is kept)")
            return
        if shown is not None and shown.text.strip():
            # Tokens had arrived (e.g. before an RPC worker died): the reply so far stays in
            # the chat, with the error as its stats line, as a stopped reply would.
            stats = {"finish_reason": "error", "summary": failure.message}
            try:
                self._chat.save_reply(reply.conversation_id, shown.text, stats, shown.segments)
            except (StoreError, OSError) as exc:
                self.saveFailed.emit(exc)
        else:
            self._put_back_replaced()
            if failure.too_long:
                self.tooLong.emit()
        self.failed.emit(failure.message)

    def _put_back_replaced(self) -> None:
        """A regenerated reply wrote nothing: the reply it was to replace, still stored, takes
        the empty one's place in the view (unless another window deleted it meanwhile)."""
        replaced, self._replaced = self._replaced, None
        if replaced is None:
            return
        try:
            still_stored = self._chat.last_reply_id() == self._replaced_id
        except (StoreError, OSError):  # shown as it was; the next store action says more
            still_stored = True
        kept = self._view.messages[:-1]
        self._view.set_messages([*kept, replaced] if still_stored else kept)

    def _end(self) -> None:
        self.reply = None
        self.control = None
        self._timer.stop()
        self.ended.emit()


def _draft_label(draft: DraftSetting) -> str | None:
    if draft.kind == "ngram":
        return "chat history"
    if draft.kind == "model" and draft.path:
        return Path(draft.path).name
    return None

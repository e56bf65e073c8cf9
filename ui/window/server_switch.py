"""The Local server switch: starts and stops the server on the loaded models, keeps what it
answers with in step with the window (models, Speculation, γ, reply settings), and tells the
window while a request is answered (the chat waits), showing the request in the Metrics and
Insight tabs."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal

from app.engine.config import GenerationConfig
from app.engine.result import GenerationResult
from app.errors import SpecChatError, user_message
from app.metrics.rounds import RoundRecord
from ui.formatting import rate
from ui.messages import describe
from ui.widgets.insight_panel import InsightPanel
from ui.widgets.live_metrics import LiveReply
from ui.widgets.metrics_panel import MetricsPanel
from ui.widgets.server_panel import ServerPanel
from ui.window.model_session import ModelSession
from ui.workers.engine_host import EngineHost
from ui.workers.local_server import LocalServer, ServerModels, n_max_for


class ServerSwitch(QObject):
    """Signals: servingChanged(bool): a request started or ended (False also when the server
    stops with none running, for a message held behind a request it dropped); errorRaised(str);
    statusMessage(str)."""

    servingChanged = Signal(bool)
    errorRaised = Signal(str)
    statusMessage = Signal(str)

    def __init__(
        self,
        *,
        host: EngineHost,
        panel: ServerPanel,
        metrics: MetricsPanel,
        insight: InsightPanel,
        models: ModelSession,
        reply_settings: Callable[[], tuple[GenerationConfig, bool]],
        clock: Callable[[], float] = time.perf_counter,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.server = LocalServer(host, self)
        self._panel = panel
        self._metrics = metrics
        self._insight = insight
        self._models = models
        self._reply_settings = reply_settings
        self._live = LiveReply(clock=clock)
        self.answered = 0  # requests answered since the server was switched on
        self._serving = False  # between a request's start and end, as the window hears them
        worker = host.worker
        queued = Qt.ConnectionType.QueuedConnection
        worker.serveStarted.connect(self._on_started, queued)
        worker.serveRound.connect(self._on_round, queued)
        worker.serveEnded.connect(self._on_ended, queued)
        panel.switched.connect(self.set_on)

    def set_on(self, on: bool) -> None:
        """Serve (or stop serving) the loaded models on 127.0.0.1 at the panel's port."""
        if not on:
            self.server.stop()
            self._panel.show_state("")
            if not self._serving:
                # A request the stop dropped before its turn never starts or ends here.
                self.servingChanged.emit(False)
            return
        models = self._served_models()
        if models is None:
            self._panel.show_state("", "Load a target model first.")
            return
        self.answered = 0
        try:
            url = self.server.start(
                self._panel.port.value(), self._panel.api_key.text().strip(), models
            )
        except SpecChatError as exc:
            self._panel.show_state("", describe(exc))
            self.errorRaised.emit(f"The local server did not start: {user_message(exc)}.")
            return
        self._panel.show_state(url, "Requests take turns with your chat.")

    def follow_window(self) -> None:
        """The models or reply settings changed: the next requests are answered as the window
        is set up now (a request already running keeps its own)."""
        models = self._served_models()
        if models is not None and self.server.url:
            self.server.follow(models)

    def request_ahead(self) -> bool:
        """Whether a request waits for the engine or runs on it: a reply asked for now would
        run after it."""
        return self.server.request_ahead()

    def _served_models(self) -> ServerModels | None:
        """What the server answers with, from the loaded models and the reply settings; None
        without a target."""
        loaded = self._models.loaded
        if loaded is None or loaded.target is None:
            return None
        config, speculation = self._reply_settings()
        drafts = loaded.draft.kind != "none"
        return ServerModels(
            model_id=Path(loaded.target.path).stem,
            n_ctx=loaded.target.n_ctx,
            config=config,
            n_max=n_max_for(config, speculation and drafts),
            tool_dialect=loaded.tool_dialect,
            drafts=drafts,
        )

    def _on_started(self) -> None:
        config, _speculation = self._reply_settings()
        self._live.start(config.gamma.start)
        # Both tabs describe the request from now on, not the chat's last reply.
        self._metrics.clear()
        self._insight.clear()
        self._serving = True
        self.servingChanged.emit(True)

    def _on_round(self, record: RoundRecord) -> None:
        for _ in range(record.emitted):
            self._live.on_token()
        self._live.on_round(record)
        self._metrics.show_stats(self._live.stats(), speculative=record.drafted > 0)

    def _on_ended(self, result: GenerationResult | None) -> None:
        self._serving = False
        if result is not None:
            self._metrics.show_stats(result.stats, speculative=result.mode != "plain")
            self._insight.update_from_result(result)
            self.statusMessage.emit(_ended_message(result))
        # Counted here, as each answer reaches the window: the server counts a request once
        # its sink has heard the end, which can be after this runs, so /health's figure read
        # now would be one behind.
        if result is not None and result.finish_reason != "cancelled":
            self.answered += 1
        if self.server.url:
            self._panel.show_state(self.server.url, f"{self.answered} answered")
        self.servingChanged.emit(False)


def _ended_message(result: GenerationResult) -> str:
    tokens = result.stats.generated_tokens
    if result.finish_reason == "cancelled":
        # Its client got an error, not a reply (app.server.sse.Feed): not "answered".
        return f"A local server request was stopped before it ended, after {tokens} tokens."
    return (
        f"Answered a local server request: {tokens} tokens, {rate(result.stats.tokens_per_second)}."
    )

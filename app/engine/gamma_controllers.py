"""γ auto's controllers, one per draft, kept for as long as the engine that owns them.

What a draft's acceptance and costs were earlier in the session is the best prior for its next
reply, so each draft keeps its controller across replies and draft switches. Costs are tied to
the target, and an engine lives exactly as long as its target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.engine.config import GenerationConfig
from app.engine.drafters import Drafter
from app.metrics.cost_model import MAX_GAMMA, MAX_STOPPED_GAMMA

if TYPE_CHECKING:
    from app.engine.adaptive import GammaController


class GammaControllers:
    """The controller of each draft, by (mode, label), made on first use."""

    def __init__(self, free_draft_limit: int) -> None:
        self._free_draft_limit = free_draft_limit
        self._by_draft: dict[tuple[str, str], GammaController] = {}

    def get(
        self,
        drafter: Drafter | None,
        config: GenerationConfig,
        plain_step: tuple[float, int] | None,
    ) -> GammaController | None:
        """`drafter`'s controller, or None unless `config` asks for auto and a drafter is set.
        plain_step, (seconds, depth) of the engine's latest plain step, primes a new one."""
        if not config.gamma.is_auto or drafter is None:
            return None
        from app.engine.adaptive import GammaController  # noqa: PLC0415 - only for gamma=auto

        key = (drafter.mode, drafter.label)
        controller = self._by_draft.get(key)
        if controller is None:
            # Only a draft model says how sure it is of each token; lookup proposals are certain.
            # Its confidence stop ends its drafts, under a ceiling one verification holds.
            stops = drafter.mode in ("draft", "hybrid")
            ceiling = min(MAX_STOPPED_GAMMA, self._free_draft_limit) if stops else MAX_GAMMA
            controller = GammaController(
                max_gamma=ceiling, initial_gamma=config.gamma.start, confidence_stop=stops
            )
            if plain_step is not None:
                controller.note_plain_step(*plain_step)
            self._by_draft[key] = controller
        return controller

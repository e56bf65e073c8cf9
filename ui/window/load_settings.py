"""What the window's settings ask llama.cpp to load: a model's config and the draft setting.

A worker list in the preferences that does not parse (only a hand-edited file holds one: the
Settings field refuses bad lists) is reported through `warn` and the model loads locally.
"""

from __future__ import annotations

from collections.abc import Callable

from app.engine.model_host import DraftSetting
from app.errors import InvalidSettingError, user_message
from app.llama import rpc
from app.llama.config import ModelConfig
from ui.settings import DRAFT_AUTO, DRAFT_NGRAM, DRAFT_NONE, Settings

Warn = Callable[[str], None]


def model_config(settings: Settings, path: str, *, draft: bool, warn: Warn) -> ModelConfig:
    threads = settings.get_int("models/n_threads")
    return ModelConfig(
        path,
        n_ctx=settings.get_int("models/n_ctx"),
        n_gpu_layers=settings.get_int(
            "models/draft_gpu_layers" if draft else "models/target_gpu_layers"
        ),
        n_threads=threads if threads > 0 else None,
        rpc_servers=_workers(settings, "models/draft_rpc" if draft else "models/target_rpc", warn),
        prompt_cache_mib=0 if draft else settings.get_int("models/prompt_cache_mib"),
    )


def unapplied_note(settings: Settings, loaded: ModelConfig) -> str:
    """A note for settings a cancelled reload did not apply: Settings shows them, the target
    `loaded` runs without them until the next load ("" when it runs with them)."""
    wanted = model_config(settings, loaded.path, draft=False, warn=lambda _text: None)
    fields = ("n_ctx", "n_gpu_layers", "n_threads", "prompt_cache_mib", "rpc_servers")
    if all(getattr(wanted, f) == getattr(loaded, f) for f in fields):
        return ""
    return (
        " The models keep their earlier settings; the new ones in Settings apply at the next load."
    )


def draft_choice(settings: Settings, value: str, *, demo: bool, warn: Warn) -> DraftSetting | None:
    """The draft the Draft list's value asks for; None with a demo target: the demo's own."""
    if value == DRAFT_AUTO:
        return None if demo else DraftSetting("none")
    if value == DRAFT_NGRAM:
        return DraftSetting("ngram")
    if value == DRAFT_NONE:
        return DraftSetting("none")
    return DraftSetting(
        "model",
        model_config(settings, value, draft=True, warn=warn),
        settings.get_bool("models/draft_with_history"),
    )


def _workers(settings: Settings, key: str, warn: Warn) -> tuple[str, ...]:
    text = settings.get_str(key).strip()
    try:
        return rpc.parse_endpoints(text) if text else ()
    except InvalidSettingError as exc:
        warn(f"{user_message(exc)}; loading on this machine instead.")
        return ()

"""What the window and the engine worker say to each other: requests in, states and failures
out, all plain immutable data (the worker's thread boundary, ui/workers/engine.py). Loading's
own requests and states (LoadRequest, LoadTicket, LoadedState) are the ModelHost's, in
app/engine/model_host.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.engine.chat_template import ChatMessage
from app.engine.config import GenerationConfig
from app.engine.control import GenerationControl
from app.engine.model_host import LoadedState
from app.engine.session import EngineSession
from models.demo import DemoModels


@dataclass(frozen=True, slots=True)
class LoadFailure:
    """A load failed or was cancelled: the window's sentence, and what is held now."""

    message: str
    cancelled: bool
    state: LoadedState[DemoModels]


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    request_id: int
    messages: tuple[ChatMessage, ...]
    config: GenerationConfig
    control: GenerationControl


RuntimeTask = Callable[[EngineSession], None]


@dataclass(frozen=True, slots=True)
class GenerationFailure:
    request_id: int
    message: str
    cancelled: bool = False  # stopped before the reply began: not an error
    too_long: bool = False  # the conversation, with the message just sent, overflows the context

"""The Runtime's prompt side: chat messages, or plain text, into the loaded target's token
ids, with the target's own chat template or the one its config names."""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.chat_prompt import chat_prompt_ids
from app.engine.chat_template import ChatMessage
from app.engine.control import GenerationControl
from app.engine.tool_calls import ToolDialect, ToolOffer, tool_dialect
from app.errors import InvalidSettingError
from app.llama.model import LlamaModel


class TargetPrompts:
    """Mixed into Runtime, which sets `target` as it loads one."""

    target: LlamaModel | None

    def _require_target(self) -> LlamaModel:
        if self.target is None:
            raise InvalidSettingError("no target model is loaded")
        return self.target

    def chat_prompt(
        self,
        messages: Sequence[ChatMessage],
        control: GenerationControl | None = None,
        tools: ToolOffer | None = None,
    ) -> list[int]:
        """Prompt ids from the target's own template; Stop on `control` ends a slow render."""
        target = self._require_target()
        return chat_prompt_ids(
            target,
            self._chat_template(),
            messages,
            tools=tools,
            bos_token=target.bos_text,
            eos_token=target.eos_text,
            should_stop=None if control is None else (lambda: control.stop_requested),
        )

    def tool_dialect(self) -> ToolDialect:
        """How the target's template offers functions and how its calls read."""
        return tool_dialect(self._chat_template())

    def _chat_template(self) -> str | None:
        target = self._require_target()
        return target.config.chat_template or target.meta("tokenizer.chat_template")

    def text_prompt(self, text: str, *, parse_special: bool = False) -> list[int]:
        target = self._require_target()
        return target.tokenize(text, add_special=True, parse_special=parse_special)

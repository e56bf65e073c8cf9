"""A server started with `--draft none` has nothing to draft from: a request's
`speculative.n_max` cannot change that, and its `speculation` says what ran, not what was
asked, with a notice when the two differ."""

from __future__ import annotations

from typing import Any

from app.engine.config import GenerationConfig
from app.server.schemas import Defaults, parse_chat, parse_completion

PLAIN_SERVER = Defaults(GenerationConfig(), "auto", drafts=False)
HI = [{"role": "user", "content": "Hi"}]


def test_a_request_asking_for_speculation_runs_plain_and_is_told_why() -> None:
    request = parse_chat({"messages": HI, "speculative": {"n_max": 8}}, PLAIN_SERVER)
    assert request.n_max == 0
    assert not request.speculative
    assert request.config.gamma.is_off
    assert len(request.notices) == 1
    assert "n_max 8" in request.notices[0] and "--draft none" in request.notices[0]


def test_the_server_default_is_off_without_a_notice() -> None:
    request = parse_completion({"prompt": "Hi"}, PLAIN_SERVER)
    assert request.n_max == 0
    assert request.notices == ()


def test_asking_for_off_on_a_plain_server_is_no_news() -> None:
    request = parse_chat({"messages": HI, "speculative": {"n_max": 0}}, PLAIN_SERVER)
    assert request.n_max == 0 and request.notices == ()


def test_a_server_with_a_draft_keeps_the_request_setting() -> None:
    drafting = Defaults(GenerationConfig(), "auto")
    asked: dict[str, Any] = {"messages": HI, "speculative": {"n_max": 8}}
    assert parse_chat(asked, drafting).n_max == 8
    assert parse_chat(asked, drafting).notices == ()
    assert parse_chat({"messages": HI}, drafting).n_max == "auto"

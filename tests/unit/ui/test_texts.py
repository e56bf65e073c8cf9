"""Words the user reads: error sentences, stats lines, and which mode a reply is shown in."""

from __future__ import annotations

from typing import Any

import pytest

from app.errors import (
    NOT_GGUF,
    Cancelled,
    ContextOverflowError,
    DraftIncompatibleError,
    KvCacheFullError,
    ModelLoadError,
)
from app.store_errors import StoreError
from ui.formatting import percent, rate, seconds, speedup_headline, stats_line
from ui.messages import describe


def test_user_errors_read_as_one_sentence() -> None:
    assert describe(ModelLoadError("/m/x.gguf", NOT_GGUF)) == (
        f"Cannot load model /m/x.gguf: {NOT_GGUF}."
    )
    assert describe(DraftIncompatibleError("d.gguf", "t.gguf", "vocab sizes differ")) == (
        "Draft d.gguf is not compatible with target t.gguf: vocab sizes differ."
    )
    assert describe(StoreError("the database is newer")) == "The database is newer."
    assert describe(Cancelled("model loading cancelled")) == "Cancelled."
    assert describe(ContextOverflowError(5000, 4096)) == (
        "The conversation is 5000 tokens but the context holds 4096; shorten your message, start "
        "a new chat or raise "
        "the context size in Settings."
    )
    # A full cache is not a prompt that is too long: it gets its own words.
    assert describe(KvCacheFullError(900, 40, 1024)) == (
        "The model's memory for this conversation is full (1024 tokens of context); start a "
        "new chat or raise the context size in Settings."
    )


def test_bugs_get_a_short_sentence_and_the_log_gets_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    try:
        raise ValueError("index 7 out of range\nmore detail")
    except ValueError as exc:
        text = describe(exc)
    assert text == "Something went wrong (index 7 out of range); the details are in the log."
    assert "Traceback" in caplog.text


def test_numbers() -> None:
    assert percent(None) == "—" and percent(0.931) == "93.1 %"
    assert rate(None) == "—" and rate(87.06) == "87.1 tok/s"
    assert seconds(0.0456) == "46 ms" and seconds(2.5) == "2.50 s" and seconds(None) == "—"


def base_stats(**extra: Any) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "mode": "draft",
        "draft": "Q4_1.gguf",
        "gamma_label": "5",
        "acceptance_rate": 0.9,
        "tokens_per_second": 80.0,
        "ttft_s": 0.05,
        "generated_tokens": 48,
        "finish_reason": "length",
    }
    stats.update(extra)
    return stats


def test_stats_line_names_the_mode_and_its_figures() -> None:
    assert stats_line(base_stats()) == (
        "mode draft · draft Q4_1.gguf · γ 5 · acceptance 90.0 % · 80.0 tok/s · TTFT 50 ms · "
        "48 tokens"
    )
    # Under γ auto, the drafts' mean length: 38 chat-history tokens in one round of γ 5.
    auto = stats_line(base_stats(gamma_label="Auto", gamma_histogram={"5": 1}, drafted=38))
    assert "· γ Auto (drafts of 38.0) ·" in auto
    mixed = stats_line(base_stats(gamma_label="Auto", gamma_histogram={0: 3, 2: 2}, drafted=3))
    assert "· γ Auto (drafts of 1.5) ·" in mixed
    plain = stats_line(base_stats(mode="plain", acceptance_rate=None))
    assert plain.startswith("mode plain · 80.0 tok/s") and "acceptance" not in plain
    stopped = stats_line(base_stats(finish_reason="cancelled", switched=True))
    assert stopped.endswith("speculation switched mid-reply · stopped")
    assert stats_line(base_stats(finish_reason="context")).endswith("48 tokens · context full")
    assert stats_line(base_stats(exact=True)).endswith("48 tokens · exact")


def test_a_slow_drafts_headline_advises_gamma_auto_only_when_gamma_is_not_auto() -> None:
    fixed_text, _tip = speedup_headline(0.8, speculative=True, gamma_auto=False)
    auto_text, _tip = speedup_headline(0.8, speculative=True, gamma_auto=True)
    assert "Try γ Auto or another draft." in fixed_text
    assert "γ Auto" not in auto_text and "Try another draft." in auto_text
    estimate, _tip = speedup_headline(0.8, speculative=True, measured=False, gamma_auto=True)
    assert estimate.startswith("≈0.80×: slower than without a draft (estimate).")

"""How numbers read in the window. Undefined figures are "—", never a misleading 0."""

from __future__ import annotations

from typing import Any, Literal

from app.metrics.sources import accepted_by_source

DASH = "—"

MODE_WORDS = {
    "plain": "plain (speculation off)",
    "draft": "speculative, draft model",
    "ngram": "speculative, prompt lookup",
    "suffix": "speculative, chat history",
    "hybrid": "speculative, draft model and chat history",
}


def percent(value: float | None) -> str:
    return DASH if value is None else f"{value * 100:.1f} %"


def rate(value: float | None) -> str:
    return DASH if value is None else f"{value:.1f} tok/s"


def number(value: float | None, digits: int = 2) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def seconds(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value * 1000:.0f} ms" if value < 1.0 else f"{value:.2f} s"


# Speedups inside this band read as "about as fast" as plain decoding: one reply, or one
# comparison, on a desktop's CPU moves by more than that between runs.
ABOUT_AS_FAST = (0.95, 1.05)

SpeedupBand = Literal["faster", "about", "slower"]


def speedup_band(speedup: float) -> SpeedupBand:
    """How a speedup over plain decoding reads in words, wherever one is judged."""
    low, high = ABOUT_AS_FAST
    if speedup >= high:
        return "faster"
    return "about" if speedup > low else "slower"


# Why a reply ran plain, for the headline.
NO_DRAFT_IN_USE = "no draft was in use"
SPECULATION_OFF = "speculation was off"
AUTO_DID_NOT_DRAFT = "γ Auto drafted nothing, as drafting would not have paid"
DRAFT_PAUSED = "the draft paused itself, as drafting did not pay"


def speedup_headline(
    speedup: float | None,
    *,
    speculative: bool,
    measured: bool = True,
    tooltip: str = "",
    gamma_auto: bool = False,
    plain_because: str = NO_DRAFT_IN_USE,
) -> tuple[str, str]:
    """The plain-words result of speculation for the headline, and its tooltip. measured:
    against a plain reply's speed; otherwise the figure reads as the estimate it is.
    gamma_auto: γ is Auto already, so the advice for a slow draft is another draft only.
    plain_because: why a reply that did not speculate did not (one of the reasons here)."""
    if not speculative:
        return f"Plain decoding: {plain_because}.", ""
    if speedup is None:
        return "", ""
    figure = f"{speedup:.2f}×" if measured else f"≈{speedup:.2f}×"
    estimate = "" if measured else " (estimate)"
    band = speedup_band(speedup)
    if band == "faster":
        return f"{figure} faster than without a draft{estimate}", tooltip
    if band == "about":
        return f"About as fast as without a draft ({figure}{estimate})", tooltip
    advice = "Try another draft." if gamma_auto else "Try γ Auto or another draft."
    return f"{figure}: slower than without a draft{estimate}. {advice}", tooltip


def too_short_headline(tokens: int, rounds: int, needed: int) -> tuple[str, str]:
    """The headline for a speculative reply too short to judge, and its tooltip."""
    return (
        f"Too short to judge the speed ({tokens} tokens)",
        f"This reply took {rounds} rounds; a speedup is judged from {needed} rounds on, as over "
        "the first few the draft model's reading of the prompt, or one lucky draft, outweighs "
        "the rest.",
    )


def drafted_per_round(stats: dict[str, Any]) -> float | None:
    """Draft tokens verified per speculative round, from a stored reply's stats (None when no
    round speculated). The histogram's keys are γ, strings once read back from JSON."""
    histogram = stats.get("gamma_histogram") or {}
    rounds = sum(int(n) for gamma, n in histogram.items() if int(gamma) > 0)
    drafted = stats.get("drafted")
    return drafted / rounds if rounds and isinstance(drafted, int) else None


def stats_line(stats: dict[str, Any]) -> str:
    """The line under a reply, from the stats dict the store keeps for it.

    Keys: mode (a MODE_WORDS key), draft (label or None), gamma_label, switched (bool),
    exact (bool), variation (text or None), speedup (over plain decoding, or None),
    speedup_measured (False when speedup is an estimate from one timed step),
    finish_reason, and GenerationStats' fields.
    """
    mode = str(stats.get("mode", "plain"))
    parts = [f"mode {mode}"]
    if mode != "plain":
        if stats.get("draft"):
            parts.append(f"draft {stats['draft']}")
        label = stats.get("gamma_label", stats.get("gamma", DASH))
        ran = drafted_per_round(stats)
        if ("Auto" in str(label) or "→" in str(label)) and ran:
            # What ran under γ auto, or across a change mid-reply: the drafts' mean length,
            # which the chat history's free tokens may take past every γ asked for.
            label = f"{label} (drafts of {ran:.1f})"
        parts.append(f"γ {label}")
        parts.append(f"acceptance {percent(stats.get('acceptance_rate'))}")
        by_source = accepted_by_source(stats)
        if by_source:
            parts.append(by_source)
        if stats.get("speedup"):
            estimate = stats.get("speedup_measured") is False
            figure = f"{float(stats['speedup']):.2f}×"
            parts.append(
                f"≈{figure} plain speed (estimate)" if estimate else f"{figure} plain speed"
            )
    parts.append(rate(stats.get("tokens_per_second")))
    parts.append(f"TTFT {seconds(stats.get('ttft_s'))}")
    parts.append(f"{stats.get('generated_tokens', 0)} tokens")
    if stats.get("exact"):
        parts.append("exact")
    if stats.get("variation"):
        parts.append(str(stats["variation"]))
    if stats.get("switched"):
        parts.append("speculation switched mid-reply")
    if stats.get("finish_reason") == "cancelled":
        parts.append("stopped")
    elif stats.get("finish_reason") == "context":
        parts.append("context full")
    return " · ".join(parts)
